"""Pruning: every interval each replica tries a round; the one holding the lock deletes.

Published events are only a record of what was sent (JetStream has the events), and
the command log answers ``GET .../commands/{id}`` for recent commands; a command's
history lives on in the audit trail (``MOWDECK_FLEET_AUDIT_RETENTION_DAYS``, pruned in
the same round) and in Telemetry's timeline.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter

from mowdeck.fleet.ports import PruneCutoffs, Pruning
from mowdeck.fleet.settings import FleetSettings
from mowdeck.kit.housekeeping import Housekeeping

__all__ = ["Pruner"]


class Pruner(Housekeeping):
    """Fleet's pruning round: published events, the command log and the audit trail."""

    def __init__(
        self,
        pruning: Pruning,
        settings: FleetSettings,
        registry: CollectorRegistry,
        *,
        clock: Callable[[], datetime],
    ) -> None:
        s = settings

        async def prune() -> dict[str, int] | None:
            cutoffs = PruneCutoffs.at(
                clock(),
                s.fleet_events_relay_retention_days,
                s.fleet_command_retention_days,
                s.fleet_audit_retention_days,
            )
            return await pruning.prune(cutoffs, s.fleet_prune_batch_rows)

        deleted = Counter(
            "mowdeck_fleet_pruned_rows_total",
            "Rows deleted by pruning",
            ["table"],
            registry=registry,
        )
        super().__init__(
            "fleet-pruning", s.fleet_prune_interval_seconds, prune, deleted, what="pruning"
        )
