"""Telemetry settings: every ``MOWDECK_TELEMETRY_*`` variable of ADR 0017 with its default."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Annotated

import msgspec

from mowdeck.kit.settings import BaseSettings, load_settings

__all__ = ["TelemetrySettings", "load_telemetry_settings"]

Positive = Annotated[float, msgspec.Meta(gt=0)]
Count = Annotated[int, msgspec.Meta(ge=1)]


class TelemetrySettings(BaseSettings, frozen=True, kw_only=True):
    """What the Telemetry service reads from the environment."""

    # An unchanged state is written to history at most once per this many seconds.
    telemetry_heartbeat_history_seconds: Positive = 300.0
    # The latest state is reported ``stale`` when older than this.
    telemetry_stale_after_seconds: Positive = 30.0
    # A state observed further ahead of this service's clock is dropped: the latest row
    # is guarded by ``observed_at``, and one state from a mower whose clock runs years
    # ahead would hold every later state off as older.
    telemetry_max_clock_skew_seconds: Positive = 300.0
    # Raw queries are cut at this many rows; a step needing more bins is refused.
    telemetry_query_max_rows: Count = 5000
    telemetry_query_max_range_days: Count = 31
    # Deliveries of a command result for a mower the directory does not know yet.
    telemetry_unknown_mower_attempts: Count = 3
    # Delay before a result for an unknown mower is redelivered.
    telemetry_unknown_mower_retry_seconds: Positive = 1.0
    telemetry_retention_interval_seconds: Positive = 3600.0
    telemetry_retention_history_days: Count = 30
    telemetry_retention_positions_days: Count = 90
    telemetry_retention_timeline_days: Count = 30
    # Tombstones of removed mowers are dropped after this many days (default: the longest
    # of the three retentions above).
    telemetry_retention_tombstone_days: Count | None = None
    telemetry_retention_batch_rows: Count = 5000
    # Ingest micro-batches: at most this many states, waiting at most the linger.
    telemetry_batch_max: Count = 5000
    telemetry_batch_linger_ms: Annotated[float, msgspec.Meta(ge=0)] = 20.0
    # Directory seed: one ``fleet.mowers.list`` request, retried 1 s doubling to 30 s.
    telemetry_seed_timeout_seconds: Positive = 5.0
    telemetry_seed_retry_max_seconds: Positive = 30.0
    # Worker threads of the fingerprint actors' dispatcher.
    telemetry_actor_workers: Count = 2
    telemetry_db_pool_size: Count = 8
    # The collector's young-generation threshold, set by ``mowdeck telemetry`` for its
    # process (0 keeps Python's 700). Ingest allocates a dozen objects per state; at 700
    # the collector ran about every 60 states and took a tenth of the ingest CPU.
    # Above what two full batches in flight keep alive (about three tracked objects per
    # state): in steady ingest the young collection, which would only walk survivors,
    # does not run at all (docs/telemetry.md, "Where the time goes").
    telemetry_gc_young_threshold: Annotated[int, msgspec.Meta(ge=0)] = 100_000

    @property
    def heartbeat(self) -> timedelta:
        """``telemetry_heartbeat_history_seconds`` as a timedelta."""
        return timedelta(seconds=self.telemetry_heartbeat_history_seconds)

    @property
    def max_clock_skew(self) -> timedelta:
        """``telemetry_max_clock_skew_seconds`` as a timedelta."""
        return timedelta(seconds=self.telemetry_max_clock_skew_seconds)

    @property
    def stale_after(self) -> timedelta:
        """``telemetry_stale_after_seconds`` as a timedelta."""
        return timedelta(seconds=self.telemetry_stale_after_seconds)


def load_telemetry_settings(environ: Mapping[str, str] | None = None) -> TelemetrySettings:
    """``TelemetrySettings`` from ``MOWDECK_*`` variables."""
    return load_settings(TelemetrySettings, environ)
