"""The openmower kind's options as Fleet and the gateway read them."""

from __future__ import annotations

import pytest

from contracts.v1 import Connection
from mowdeck.devices.endpoints import DeviceHosts
from mowdeck.devices.kinds import OPENMOWER, SIMULATOR, ConnectionKinds
from mowdeck.devices.openmower import normalised_prefix

POLICY = ConnectionKinds([SIMULATOR, OPENMOWER]).policy(DeviceHosts(["192.168.1.0/24"]))
BROKER = "mqtt://192.168.1.5:1883"


def refusal(**options: object) -> tuple[str, str] | None:
    found = POLICY.refusal(Connection(kind="openmower", options=options))
    return None if found is None else (found.field, found.detail)


def test_good_options_pass() -> None:
    assert refusal(broker=BROKER) is None
    assert (
        refusal(
            broker="mqtts://192.168.1.5:8883",
            prefix="yard/om1/",
            credentials="yard-1",
            datum={"lat": 48.1, "lon": 11.5},
        )
        is None
    )


@pytest.mark.parametrize(
    ("options", "field", "text"),
    [
        ({}, "connection.options.broker", "missing required field `broker`"),
        ({"broker": 1883}, "connection.options.broker", "Expected `str`"),
        ({"broker": "mqtt://192.168.1.5"}, "connection.options.broker", "matching regex"),
        ({"broker": "http://192.168.1.5:80"}, "connection.options.broker", "matching regex"),
        ({"broker": "mqtt://u:pw@192.168.1.5:1883"}, "connection.options.broker", "matching"),
        ({"broker": "mqtt://10.1.1.1:1883"}, "connection.options.broker", "does not allow"),
        ({"broker": BROKER, "prefix": "yard/+/"}, "connection.options.prefix", "matching"),
        ({"broker": BROKER, "prefix": "/abs"}, "connection.options.prefix", "matching"),
        (
            {"broker": BROKER, "credentials": "../etc/passwd"},
            "connection.options.credentials",
            "matching",
        ),
        (
            {"broker": BROKER, "credentials": ".hidden"},
            "connection.options.credentials",
            "matching",
        ),
        (
            {"broker": BROKER, "datum": {"lat": 91, "lon": 0}},
            "connection.options.datum.lat",
            "<= 90",
        ),
        ({"broker": BROKER, "datum": {"lat": 1}}, "connection.options.datum.lon", "missing"),
        ({"broker": BROKER, "password": "x"}, "connection.options", "unknown field `password`"),
        ({"broker": BROKER, "stale_seconds": 0.01}, "connection.options.stale_seconds", ">= 1"),
    ],
    ids=[
        "no-broker",
        "broker-type",
        "no-port",
        "not-mqtt",
        "user-in-url",
        "host-not-allowed",
        "wildcard-prefix",
        "leading-slash",
        "credential-path",
        "credential-dot",
        "datum-range",
        "datum-missing",
        "secret-option",
        "stale-too-short",
    ],
)
def test_bad_options_are_refused_naming_the_option(
    options: dict[str, object], field: str, text: str
) -> None:
    found = refusal(**options)
    assert found is not None
    assert found[0] == field
    assert text in found[1]


def test_one_broker_serves_many_mowers_by_prefix() -> None:
    def key(prefix: str | None) -> str | None:
        options: dict[str, object] = {"broker": BROKER}
        if prefix is not None:
            options["prefix"] = prefix
        return POLICY.key(Connection(kind="openmower", options=options))

    assert key("yard/om1") != key("yard/om2")
    assert key("yard/om1") == key("yard/om1/")  # xbot_monitoring adds the slash itself
    assert key(None) == key("")
    assert key(None) != key("yard/om1")
    assert key("yard/om1") == "openmower mqtt://192.168.1.5:1883/ scope:yard/om1"


@pytest.mark.parametrize(
    ("prefix", "topic_prefix"),
    [("", ""), ("a", "a/"), ("a/", "a/"), ("a/b//", "a/b/"), ("  ", "")],
)
def test_the_prefix_is_written_as_xbot_monitoring_writes_it(prefix: str, topic_prefix: str) -> None:
    assert normalised_prefix(prefix) == topic_prefix
