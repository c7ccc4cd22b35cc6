"""The automower kind's options and cloud endpoints as Fleet and the gateway read them."""

from __future__ import annotations

import pytest

from contracts.v1 import Connection
from mowdeck.devices.automower import (
    DEFAULT_API_URL,
    DEFAULT_TOKEN_URL,
    DEFAULT_WS_URL,
    AutomowerEndpoints,
)
from mowdeck.devices.endpoints import DeviceHosts
from mowdeck.devices.kinds import AUTOMOWER, SIMULATOR, ConnectionKinds
from mowdeck.gateway.settings import GatewaySettings
from mowdeck.kit.settings import load_settings

POLICY = ConnectionKinds([SIMULATOR, AUTOMOWER]).policy(DeviceHosts(["127.0.0.1"]))
VENDOR_ID = "c7233734-b219-4287-a173-08e3643f89f0"


def refusal(**options: object) -> tuple[str, str] | None:
    found = POLICY.refusal(Connection(kind="automower", options=options))
    return None if found is None else (found.field, found.detail)


def test_good_options_pass_without_the_secret_being_read() -> None:
    # Fleet checks the credential's name only: no such file exists here.
    assert refusal(vendor_id=VENDOR_ID, credentials="husqvarna-main") is None
    for calendar in ("mowdeck", "mower"):
        assert refusal(vendor_id=VENDOR_ID, credentials="a", calendar=calendar) is None


@pytest.mark.parametrize(
    ("options", "field", "text"),
    [
        ({"credentials": "a"}, "connection.options.vendor_id", "missing required field"),
        ({"vendor_id": VENDOR_ID}, "connection.options.credentials", "missing required field"),
        ({"vendor_id": "../x", "credentials": "a"}, "connection.options.vendor_id", "regex"),
        (
            {"vendor_id": VENDOR_ID, "credentials": "../etc"},
            "connection.options.credentials",
            "regex",
        ),
        ({"vendor_id": 7, "credentials": "a"}, "connection.options.vendor_id", "Expected `str`"),
        (
            {"vendor_id": VENDOR_ID, "credentials": "a", "client_secret": "s"},
            "connection.options",
            "unknown field `client_secret`",
        ),
        (
            {"vendor_id": VENDOR_ID, "credentials": "a", "time_zone": "Mars/Olympus"},
            "connection.options",
            "time_zone: unknown time zone 'Mars/Olympus'",
        ),
        (
            {"vendor_id": VENDOR_ID, "credentials": "a", "time_zone": "../../etc/passwd"},
            "connection.options.time_zone",
            "regex",
        ),
        (
            {"vendor_id": VENDOR_ID, "credentials": "a", "calendar": "both"},
            "connection.options.calendar",
            "Invalid enum value 'both'",
        ),
    ],
)
def test_bad_options_name_the_option(options: dict[str, object], field: str, text: str) -> None:
    found = refusal(**options)
    assert found is not None
    assert found[0] == field
    assert text in found[1]


def test_a_time_zone_is_an_iana_name() -> None:
    assert refusal(vendor_id=VENDOR_ID, credentials="a", time_zone="Europe/Berlin") is None


def test_the_vendor_id_is_the_endpoint_key() -> None:
    one = Connection(kind="automower", options={"vendor_id": VENDOR_ID, "credentials": "a"})
    other = Connection(kind="automower", options={"vendor_id": VENDOR_ID, "credentials": "b"})
    assert POLICY.key(one) == f"automower id:{VENDOR_ID}" == POLICY.key(other)


def test_the_endpoints_default_to_the_vendors_production_ones() -> None:
    settings = load_settings(GatewaySettings, {})
    endpoints = settings.automower_endpoints()
    assert endpoints == AutomowerEndpoints()
    assert endpoints.token_url == DEFAULT_TOKEN_URL
    assert DEFAULT_TOKEN_URL == "https://api.authentication.husqvarnagroup.dev/v1/oauth2/token"
    assert DEFAULT_API_URL == "https://api.amc.husqvarna.dev/v1"
    assert DEFAULT_WS_URL == "wss://ws.openapi.husqvarna.dev/v1"


def test_the_endpoints_are_settings() -> None:
    settings = load_settings(
        GatewaySettings,
        {
            "MOWDECK_AUTOMOWER_TOKEN_URL": "http://127.0.0.1:9000/v1/oauth2/token",
            "MOWDECK_AUTOMOWER_API_URL": "http://127.0.0.1:9000/v1",
            "MOWDECK_AUTOMOWER_WS_URL": "ws://127.0.0.1:9000/v1",
        },
    )
    assert settings.automower_endpoints().urls == (
        "http://127.0.0.1:9000/v1/oauth2/token",
        "http://127.0.0.1:9000/v1",
        "ws://127.0.0.1:9000/v1",
    )


@pytest.mark.parametrize(
    ("variable", "value", "text"),
    [
        ("MOWDECK_AUTOMOWER_API_URL", "https://api.example/v2", "must end in /v1"),
        ("MOWDECK_AUTOMOWER_WS_URL", "https://ws.example/v1", "must be a wss or ws URL"),
        ("MOWDECK_AUTOMOWER_TOKEN_URL", "ftp://auth.example/t", "must be a https or http URL"),
    ],
)
def test_a_wrong_endpoint_fails_at_start(variable: str, value: str, text: str) -> None:
    with pytest.raises(Exception, match=text):
        load_settings(GatewaySettings, {variable: value})
