"""Pruning: every interval each replica tries a round; the one holding the lock deletes.

Published outbox rows are only a record of what was sent (JetStream has the events), and
the command log answers ``GET .../commands/{id}`` for recent commands; a command's
history lives on in the audit trail (``MOWDECK_FLEET_AUDIT_RETENTION_DAYS``, pruned in
the same round) and in Telemetry's timeline.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import structlog
from prometheus_client import CollectorRegistry, Counter

from mowdeck.fleet.ports import PruneCutoffs, Pruning
from mowdeck.fleet.settings import FleetSettings
from mowdeck.kit.periodic import Periodic

__all__ = ["Pruner"]

log = structlog.get_logger("mowdeck.fleet.pruning")


class Pruner:
    """Runs pruning rounds on a timer; ``run_once`` is the unit the tests drive."""

    def __init__(
        self,
        pruning: Pruning,
        settings: FleetSettings,
        registry: CollectorRegistry,
        *,
        clock: Callable[[], datetime],
    ) -> None:
        self._pruning = pruning
        self._settings = settings
        self._clock = clock
        self._deleted = Counter(
            "mowdeck_fleet_pruned_rows_total",
            "Rows deleted by pruning",
            ["table"],
            registry=registry,
        )
        self._timer = Periodic(
            "fleet-pruning", settings.fleet_prune_interval_seconds, self.run_once
        )

    async def run_once(self) -> dict[str, int] | None:
        """One round; rows deleted per table, or None if another replica ran it."""
        s = self._settings
        cutoffs = PruneCutoffs.at(
            self._clock(),
            s.fleet_outbox_retention_days,
            s.fleet_command_retention_days,
            s.fleet_audit_retention_days,
        )
        deleted = await self._pruning.prune(cutoffs, s.fleet_prune_batch_rows)
        if deleted is None:
            log.info("pruning skipped: another replica holds the lock")
            return None
        for table, count in deleted.items():
            self._deleted.labels(table).inc(count)
        log.info("pruning round done", **deleted)
        return deleted

    def start(self) -> None:
        """Run a round every interval (the first after one interval)."""
        self._timer.start()

    async def stop(self) -> None:
        """Stop the timer (a round in progress is cancelled; its batches are committed)."""
        await self._timer.stop()
