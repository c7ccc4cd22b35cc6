"""Notifications settings: ADR 0022's defaults, the environment overriding them, bounds."""

from __future__ import annotations

from datetime import timedelta

import pytest

from mowdeck.kit.settings import SettingsError
from mowdeck.notifications.delivery.channels.settings import ChannelSettings
from mowdeck.notifications.rules.evaluate import Thresholds
from mowdeck.notifications.settings import load_notifications_settings

# Every MOWDECK_NOTIFICATIONS_* default ADR 0022 and docs/notifications.md name.
DEFAULTS = {
    "notifications_job_min_seconds": 120.0,
    "notifications_stuck_seconds": 300.0,
    "notifications_stuck_distance_m": 0.5,
    "notifications_battery_low_percent": 20,
    "notifications_battery_rearm_percent": 30,
    "notifications_offline_after_seconds": 120.0,
    "notifications_offline_grace_seconds": 30.0,
    "notifications_cooldown_seconds": 300.0,
    "notifications_recharge_percent": 25,
    "notifications_recharge_max_seconds": 7200.0,
    "notifications_max_clock_skew_seconds": 300.0,
    "notifications_inbox_limit": 200,
    "notifications_alarm_retention_days": 90,
    "notifications_alarm_round_seconds": 30.0,
    "notifications_alarm_audit_retention_days": 400,
    "notifications_escalate_after_seconds": 0.0,
    "notifications_offline_scan_seconds": 5.0,
    "notifications_offline_scan_batch": 500,
    "notifications_state_batch_max": 2000,
    "notifications_state_batch_linger_ms": 20.0,
    "notifications_fanout_batch": 50,
    "notifications_fanout_lease_seconds": 60.0,
    "notifications_fanout_max_attempts": 8,
    "notifications_fanout_poll_seconds": 1.0,
    "notifications_actor_workers": 2,
    "notifications_seed_timeout_seconds": 2.0,
    "notifications_decision_cache_seconds": 60.0,
    "notifications_db_pool_size": 8,
    "notifications_gc_young_threshold": 100_000,
    "notifications_targets_per_user_rate": 0.1,
    "notifications_targets_per_user_burst": 20,
    # The geofence rules (issue #33).
    "notifications_geofence_seconds": 30.0,
    "notifications_geofence_metres": 5.0,
    "notifications_theft_speed_mps": 3.0,
    "notifications_theft_distance_m": 20.0,
    "notifications_sites_timeout_seconds": 2.0,
    # The delivery worker (ADR 0022 and the delivery issue).
    "notifications_lease_seconds": 60.0,
    "notifications_delivery_concurrency": 64,
    "notifications_retry_initial_seconds": 30.0,
    "notifications_retry_max_seconds": 3600.0,
    "notifications_max_attempts": 8,
    "notifications_delivery_poll_seconds": 1.0,
    "notifications_delivery_retention_days": 7,
}


@pytest.mark.parametrize(("field", "default"), DEFAULTS.items(), ids=list(DEFAULTS))
def test_default(field: str, default: object) -> None:
    assert getattr(load_notifications_settings({}), field) == default


def test_every_setting_has_a_pinned_default() -> None:
    # The channels' settings are pinned with the channels (tests/unit/notifications/channels).
    settings = load_notifications_settings({})
    channel_fields = set(ChannelSettings.__struct_fields__)
    fields = {f for f in settings.__struct_fields__ if f.startswith("notifications_")}
    assert fields - channel_fields == set(DEFAULTS)


def test_the_default_thresholds_are_the_rules_defaults() -> None:
    assert load_notifications_settings({}).thresholds == Thresholds()


def test_the_environment_overrides_the_defaults() -> None:
    settings = load_notifications_settings(
        {
            "MOWDECK_NOTIFICATIONS_JOB_MIN_SECONDS": "60",
            "MOWDECK_NOTIFICATIONS_STUCK_DISTANCE_M": "1.5",
            "MOWDECK_NOTIFICATIONS_BATTERY_LOW_PERCENT": "15",
            "MOWDECK_NOTIFICATIONS_COOLDOWN_SECONDS": "0",
            "MOWDECK_NOTIFICATIONS_INBOX_LIMIT": "50",
            "MOWDECK_NOTIFICATIONS_FANOUT_LEASE_SECONDS": "30",
        }
    )
    assert settings.thresholds.job_min == timedelta(minutes=1)
    assert settings.thresholds.stuck_distance_m == 1.5
    assert settings.thresholds.battery_low_percent == 15
    assert settings.thresholds.cooldown == timedelta(0)
    assert settings.notifications_inbox_limit == 50
    assert settings.fanout_lease == timedelta(seconds=30)
    assert settings.decision_cache_ttl == timedelta(minutes=1)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("MOWDECK_NOTIFICATIONS_JOB_MIN_SECONDS", "0"),
        ("MOWDECK_NOTIFICATIONS_STUCK_DISTANCE_M", "-1"),
        ("MOWDECK_NOTIFICATIONS_BATTERY_LOW_PERCENT", "101"),
        ("MOWDECK_NOTIFICATIONS_INBOX_LIMIT", "0"),
        ("MOWDECK_NOTIFICATIONS_STATE_BATCH_MAX", "0"),
        ("MOWDECK_NOTIFICATIONS_OFFLINE_SCAN_SECONDS", "never"),
        ("MOWDECK_NOTIFICATIONS_COOLDOWN_SECONDS", "-5"),
        ("MOWDECK_NOTIFICATIONS_TARGETS_PER_USER_RATE", "-1"),
        ("MOWDECK_NOTIFICATIONS_TARGETS_PER_USER_BURST", "0"),
    ],
    ids=[
        "job-min-zero",
        "negative-distance",
        "percent-above-100",
        "inbox-limit-zero",
        "batch-zero",
        "scan-not-a-number",
        "negative-cooldown",
        "negative-target-rate",
        "target-burst-zero",
    ],
)
def test_out_of_bounds_values_are_refused_naming_the_variable(variable: str, value: str) -> None:
    with pytest.raises(SettingsError, match=variable):
        load_notifications_settings({variable: value})


def test_the_rearm_level_must_be_above_the_low_level() -> None:
    with pytest.raises(SettingsError, match="MOWDECK_NOTIFICATIONS_BATTERY_REARM_PERCENT"):
        load_notifications_settings(
            {
                "MOWDECK_NOTIFICATIONS_BATTERY_LOW_PERCENT": "30",
                "MOWDECK_NOTIFICATIONS_BATTERY_REARM_PERCENT": "30",
            }
        )
