"""No command stays pending for ever: overdue commands are recorded failed (outcome unknown).

A command with no final result by ``expires_at`` plus the grace
(``MOWDECK_FLEET_COMMAND_RESULT_GRACE_SECONDS``) will get none any more: its shard went
away with it. Every replica runs a round every interval; a round claims overdue open
commands with ``FOR UPDATE SKIP LOCKED``, so replicas share the work without a lock of
their own. The failed status is Fleet's own record and is never published: only the
gateway publishes results.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import structlog
from prometheus_client import CollectorRegistry, Counter

from mowdeck.fleet.ports import CommandLog
from mowdeck.fleet.settings import FleetSettings
from mowdeck.kit.periodic import Periodic

__all__ = ["Finalizer"]

log = structlog.get_logger("mowdeck.fleet.finalizing")
_BATCH = 500


class Finalizer:
    """Runs finalizing rounds on a timer; ``run_once`` is the unit the tests drive."""

    def __init__(
        self,
        command_log: CommandLog,
        settings: FleetSettings,
        registry: CollectorRegistry,
        *,
        clock: Callable[[], datetime],
    ) -> None:
        self._log = command_log
        self._grace = timedelta(seconds=settings.fleet_command_result_grace_seconds)
        self._clock = clock
        self._unanswered = Counter(
            "mowdeck_fleet_commands_unanswered_total",
            "Commands recorded failed because no final result came (outcome unknown)",
            registry=registry,
        )
        self._timer = Periodic(
            "fleet-finalizing", settings.fleet_finalize_interval_seconds, self.run_once
        )

    @property
    def grace(self) -> timedelta:
        """How long after its expiry a command may still get its result."""
        return self._grace

    async def run_once(self) -> int:
        """One round: every command overdue now; how many were recorded failed."""
        now = self._clock()
        total = 0
        while True:
            failed = await self._log.finalize_overdue(now - self._grace, at=now, limit=_BATCH)
            for result in failed:
                log.warning(
                    "no result from the device gateway; command recorded failed",
                    mower_id=str(result.mower_id),
                    command_id=str(result.command_id),
                )
            total += len(failed)
            self._unanswered.inc(len(failed))
            if len(failed) < _BATCH:
                return total

    def start(self) -> None:
        """Run a round every interval (the first after one interval)."""
        self._timer.start()

    async def stop(self) -> None:
        """Stop the timer (a round in progress is cancelled; its statements are atomic)."""
        await self._timer.stop()
