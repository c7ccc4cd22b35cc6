"""Realtime settings: the defaults the docs name, and the environment overriding them."""

from __future__ import annotations

import pytest

from mowdeck.kit.settings import SettingsError
from mowdeck.realtime.settings import load_realtime_settings

DEFAULTS = {
    "realtime_authz_refresh_seconds": 30.0,
    "realtime_heartbeat_seconds": 15.0,
    "realtime_buffer_events": 1000,
    "realtime_max_lag_seconds": 30.0,
    "realtime_max_connections_per_user": 10,
    "realtime_ticket_ttl_seconds": 30.0,
    "realtime_ticket_bucket": "realtime-tickets",
    "realtime_telemetry_database": False,
    "realtime_stale_after_seconds": 30.0,
    "realtime_replay_timeout_seconds": 10.0,
    "realtime_seed_timeout_seconds": 5.0,
    "realtime_gc_young_threshold": 50_000,
    "realtime_console_fleet_url": "",
    "realtime_console_telemetry_url": "",
    "realtime_console_notifications_url": "",
    "realtime_tickets_per_user_rate": 1.0,
    "realtime_tickets_per_user_burst": 30,
    "realtime_sign_ins_per_address_rate": 0.5,
    "realtime_sign_ins_per_address_burst": 20,
    "realtime_trusted_proxies": [],
}


@pytest.mark.parametrize(("field", "default"), DEFAULTS.items(), ids=list(DEFAULTS))
def test_default(field: str, default: object) -> None:
    assert getattr(load_realtime_settings({}), field) == default


def test_every_setting_has_a_pinned_default() -> None:
    settings = load_realtime_settings({})
    fields = {f for f in settings.__struct_fields__ if f.startswith("realtime_")}
    assert fields == set(DEFAULTS)


def test_trusted_proxies_are_a_json_list_of_addresses_and_networks() -> None:
    settings = load_realtime_settings(
        {"MOWDECK_REALTIME_TRUSTED_PROXIES": '["10.0.0.0/8", "192.0.2.7"]'}
    )
    assert settings.realtime_trusted_proxies == ["10.0.0.0/8", "192.0.2.7"]


def test_the_cors_origins_are_a_json_list() -> None:
    settings = load_realtime_settings({"MOWDECK_HTTP_CORS_ORIGINS": '["http://a", "http://b"]'})
    assert settings.http_cors_origins == ["http://a", "http://b"]
    assert load_realtime_settings({}).http_cors_origins == []


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MOWDECK_REALTIME_AUTHZ_REFRESH_SECONDS", "0"),
        ("MOWDECK_REALTIME_BUFFER_EVENTS", "0"),
        ("MOWDECK_HTTP_CORS_ORIGINS", "http://a"),
        ("MOWDECK_REALTIME_TICKETS_PER_USER_RATE", "-1"),
        ("MOWDECK_REALTIME_SIGN_INS_PER_ADDRESS_BURST", "0"),
        ("MOWDECK_REALTIME_TRUSTED_PROXIES", '["10.0.0.0/8", "proxy.local"]'),
    ],
    ids=[
        "refresh-zero",
        "buffer-zero",
        "origins-not-json",
        "negative-ticket-rate",
        "sign-in-burst-zero",
        "proxy-not-an-address",
    ],
)
def test_a_bad_value_names_its_variable(name: str, value: str) -> None:
    with pytest.raises(SettingsError, match=name):
        load_realtime_settings({name: value})


def test_the_telemetry_url_is_no_longer_read_and_says_what_to_set(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level("WARNING", logger="mowdeck.settings"):
        settings = load_realtime_settings({"MOWDECK_REALTIME_TELEMETRY_URL": "http://t"})
    assert not settings.realtime_telemetry_database
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        "MOWDECK_REALTIME_TELEMETRY_URL is no longer read"
    ]
    assert "MOWDECK_REALTIME_TELEMETRY_DATABASE=true" in caplog.records[0].getMessage()
