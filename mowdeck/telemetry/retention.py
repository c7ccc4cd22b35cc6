"""Retention: every interval each replica tries the round; the one holding the lock deletes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import structlog

from mowdeck.kit.periodic import Periodic
from mowdeck.telemetry.metrics import TelemetryMetrics
from mowdeck.telemetry.ports import Cutoffs, TelemetryStore
from mowdeck.telemetry.settings import TelemetrySettings

__all__ = ["Retention"]

log = structlog.get_logger("mowdeck.telemetry.retention")


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Retention:
    """Runs retention rounds on a timer; ``run_once`` is the unit the tests drive."""

    def __init__(
        self,
        store: TelemetryStore,
        settings: TelemetrySettings,
        metrics: TelemetryMetrics,
        *,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self._store = store
        self._settings = settings
        self._metrics = metrics
        self._clock = clock
        self._timer = Periodic(
            "telemetry-retention", settings.telemetry_retention_interval_seconds, self.run_once
        )

    async def run_once(self) -> dict[str, int] | None:
        """One round; returns rows deleted per table, or None if another replica ran it."""
        s = self._settings
        cutoffs = Cutoffs.at(
            self._clock(),
            s.telemetry_retention_history_days,
            s.telemetry_retention_positions_days,
            s.telemetry_retention_timeline_days,
            s.telemetry_retention_tombstone_days,
        )
        deleted = await self._store.retention_round(cutoffs, s.telemetry_retention_batch_rows)
        if deleted is None:
            log.info("retention skipped: another replica holds the lock")
            return None
        for table, count in deleted.items():
            self._metrics.retention_deleted.labels(table=table).inc(count)
        log.info("retention round done", **deleted)
        return deleted

    def start(self) -> None:
        """Run a round every interval (the first after one interval)."""
        self._timer.start()

    async def stop(self) -> None:
        """Stop the timer (a round in progress is cancelled; its batches are committed)."""
        await self._timer.stop()
