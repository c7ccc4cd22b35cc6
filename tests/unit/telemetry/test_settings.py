"""Telemetry settings: the defaults of ADR 0017, and the environment overriding them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from mowdeck.kit.settings import SettingsError
from mowdeck.telemetry.settings import load_telemetry_settings

# Every MOWDECK_TELEMETRY_* default the ADR and docs/telemetry.md name.
DEFAULTS = {
    "telemetry_heartbeat_history_seconds": 300.0,
    "telemetry_stale_after_seconds": 30.0,
    "telemetry_max_clock_skew_seconds": 300.0,
    "telemetry_query_max_rows": 5000,
    "telemetry_query_max_range_days": 31,
    "telemetry_unknown_mower_attempts": 3,
    "telemetry_unknown_mower_retry_seconds": 1.0,
    "telemetry_retention_interval_seconds": 3600.0,
    "telemetry_retention_history_days": 30,
    "telemetry_retention_positions_days": 90,
    "telemetry_retention_timeline_days": 30,
    "telemetry_retention_tombstone_days": None,
    "telemetry_retention_batch_rows": 5000,
    "telemetry_batch_max": 5000,
    "telemetry_batch_linger_ms": 20.0,
    "telemetry_seed_timeout_seconds": 5.0,
    "telemetry_seed_retry_max_seconds": 30.0,
    "telemetry_actor_workers": 2,
    "telemetry_db_pool_size": 8,
    "telemetry_gc_young_threshold": 100_000,
}


@pytest.mark.parametrize(("field", "default"), DEFAULTS.items(), ids=list(DEFAULTS))
def test_default(field: str, default: object) -> None:
    assert getattr(load_telemetry_settings({}), field) == default


def test_every_setting_has_a_pinned_default() -> None:
    settings = load_telemetry_settings({})
    fields = {f for f in settings.__struct_fields__ if f.startswith("telemetry_")}
    assert fields == set(DEFAULTS)


def test_the_environment_overrides_the_defaults() -> None:
    settings = load_telemetry_settings(
        {
            "MOWDECK_TELEMETRY_QUERY_MAX_ROWS": "100",
            "MOWDECK_TELEMETRY_RETENTION_BATCH_ROWS": "250",
            "MOWDECK_TELEMETRY_RETENTION_INTERVAL_SECONDS": "60",
            "MOWDECK_TELEMETRY_HEARTBEAT_HISTORY_SECONDS": "120",
            "MOWDECK_TELEMETRY_RETENTION_TOMBSTONE_DAYS": "7",
        }
    )
    assert settings.telemetry_query_max_rows == 100
    assert settings.telemetry_retention_batch_rows == 250
    assert settings.telemetry_retention_interval_seconds == 60.0
    assert settings.heartbeat == timedelta(minutes=2)
    assert settings.telemetry_retention_tombstone_days == 7


@pytest.mark.parametrize(
    "variable",
    ["MOWDECK_TELEMETRY_QUERY_MAX_ROWS", "MOWDECK_TELEMETRY_RETENTION_BATCH_ROWS"],
)
def test_limits_must_be_positive(variable: str) -> None:
    with pytest.raises(SettingsError):
        load_telemetry_settings({variable: "0"})
