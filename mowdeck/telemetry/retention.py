"""Retention: every interval each replica tries the round; the one holding the lock deletes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from mowdeck.kit.housekeeping import Housekeeping
from mowdeck.telemetry.metrics import TelemetryMetrics
from mowdeck.telemetry.ports import Cutoffs, TelemetryStore
from mowdeck.telemetry.settings import TelemetrySettings

__all__ = ["Retention"]


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Retention(Housekeeping):
    """Telemetry's retention round (ADR 0017): history, positions, timeline, tombstones."""

    def __init__(
        self,
        store: TelemetryStore,
        settings: TelemetrySettings,
        metrics: TelemetryMetrics,
        *,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        s = settings

        async def delete() -> dict[str, int] | None:
            cutoffs = Cutoffs.at(
                clock(),
                s.telemetry_retention_history_days,
                s.telemetry_retention_positions_days,
                s.telemetry_retention_timeline_days,
                s.telemetry_retention_tombstone_days,
            )
            return await store.retention_round(cutoffs, s.telemetry_retention_batch_rows)

        super().__init__(
            "telemetry-retention",
            s.telemetry_retention_interval_seconds,
            delete,
            metrics.retention_deleted,
            what="retention",
        )
