"""Device endpoints: which URLs MOWDECK_GATEWAY_DEVICE_HOSTS lets a connection dial."""

from __future__ import annotations

import pytest

from contracts.v1 import Connection
from mowdeck.gateway.connections.endpoints import DeviceHosts, EndpointPolicy

HOSTS = DeviceHosts(
    ["mowers.example.com", "*.lawn.example.net:7001", "10.20.0.0/16", "127.0.0.1:8090", "[fd00::7]"]
)


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("wss://mowers.example.com/m/1", True),
        ("ws://MOWERS.example.com.:9000/m/1", True),
        ("ws://a.lawn.example.net:7001/", True),
        ("ws://a.lawn.example.net:7002/", False),
        ("ws://lawn.example.net:7001/", False),
        ("ws://evil-mowers.example.com/", False),
        ("ws://mowers.example.com.evil.org/", False),
        ("ws://10.20.3.4:22/", True),
        ("ws://10.21.0.1/", False),
        ("ws://127.0.0.1:8090/mowers/x/ws", True),
        ("ws://127.0.0.1:5432/", False),
        ("ws://127.0.0.1/", False),  # port 80 by the scheme
        ("ws://[::ffff:127.0.0.1]:8090/", True),  # the same address, written as IPv6
        ("ws://[::ffff:10.0.0.1]:80/", False),
        ("ws://[fd00::7]:1234/", True),
        ("ws://2130706433:8090/", False),  # 127.0.0.1 as a number: a name, and not listed
        ("ws://mowers.example.com@169.254.169.254/", False),  # the host is after the @
        ("ws:///nohost", False),
        ("ws://h:99999/", False),
    ],
    ids=str,
)
def test_a_url_is_allowed_only_by_a_pattern_matching_its_host_and_port(
    url: str, allowed: bool
) -> None:
    assert (HOSTS.refusal(url) is None) is allowed


@pytest.mark.parametrize(
    "pattern",
    ["host:0", "host:x", "10.0.0.0/33", "bad_name", "*", "[::1", "a..b"],
    ids=["port-zero", "port-text", "prefix", "underscore", "bare-wildcard", "bracket", "dots"],
)
def test_a_pattern_that_is_none_fails(pattern: str) -> None:
    with pytest.raises(ValueError, match="device host pattern"):
        DeviceHosts([pattern])


def test_the_policy_names_the_url_option_of_the_kind() -> None:
    policy = EndpointPolicy(HOSTS, {"simulator": "url"})
    refusal = policy.refusal(Connection(kind="simulator", options={"url": "ws://10.0.0.1/"}))
    assert refusal is not None
    assert refusal.field == "connection.options.url"
    assert "10.0.0.1:80" in refusal.detail
    not_text = policy.refusal(Connection(kind="simulator", options={"url": 7}))
    assert not_text is not None
    assert not_text.field == "connection.options.url"
    assert policy.refusal(Connection(kind="simulator", options={})) is None
    assert policy.refusal(Connection(kind="mqtt", options={"url": "ws://10.0.0.1/"})) is None
