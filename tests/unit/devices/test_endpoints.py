"""Device endpoints: which URLs MOWDECK_GATEWAY_DEVICE_HOSTS lets a connection dial."""

from __future__ import annotations

import pytest

from contracts.v1 import Connection
from mowdeck.devices.endpoints import DeviceHosts, EndpointPolicy, endpoint_key

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


MOWER = "abcdef00-0000-4000-8000-000000000001"
SIM = f"simulator ws://127.0.0.1:8090/mowers/{MOWER}/ws"


def _simulator(url: object) -> Connection:
    return Connection(kind="simulator", options={"url": url, "heartbeat_seconds": 5})


@pytest.mark.parametrize(
    ("url", "key"),
    [
        (f"ws://127.0.0.1:8090/mowers/{MOWER}/ws", SIM),
        (f"WS://127.0.0.1:8090/mowers/{MOWER}/ws", SIM),
        (f"ws://[::ffff:127.0.0.1]:8090/mowers/{MOWER}/ws", SIM),
        (f"ws://[::FFFF:7f00:1]:8090/mowers/{MOWER}/ws", SIM),
        (f"ws://127.0.0.1:8090/mowers/{MOWER.upper()}/ws", SIM),
        (f"ws://127.0.0.1:8090/mowers/{{{MOWER.replace('-', '')}}}/ws", SIM),
        (f"ws://127.0.0.1:8090/mowers/%7B{MOWER}%7D/ws", SIM),
        (f"ws://127.0.0.1:8090/mowers/./x/../{MOWER}/ws", SIM),
        (f"ws://user:secret@127.0.0.1:8090/mowers/{MOWER}/ws#hello", SIM),
        ("ws://Mowers.Example.COM./m", "simulator ws://mowers.example.com:80/m"),
        ("ws://mowers.example.com:80/m", "simulator ws://mowers.example.com:80/m"),
        ("wss://mowers.example.com", "simulator wss://mowers.example.com:443/"),
        ("wss://mowers.example.com:443/", "simulator wss://mowers.example.com:443/"),
        ("ws://[FD00:0::7]:7001/%61", "simulator ws://[fd00::7]:7001/a"),
        ("ws://h/m?b=1&a=2", "simulator ws://h:80/m?b=1&a=2"),
        ("ws://h:8091/m", "simulator ws://h:8091/m"),
        ("wss://h:80/m", "simulator wss://h:80/m"),
        ("ws://h/M", "simulator ws://h:80/M"),
        ("ws:///nohost", None),
        (7, None),
    ],
    ids=[
        "as-written",
        "scheme-case",
        "ipv4-mapped-ipv6",
        "ipv4-mapped-ipv6-hex",
        "uuid-upper-case",
        "uuid-braces-no-hyphens",
        "uuid-percent-encoded",
        "dot-segments",
        "user-and-fragment",
        "host-case-trailing-dot",
        "default-port-explicit",
        "empty-path",
        "empty-path-vs-slash",
        "ipv6-literal-and-unreserved-escape",
        "query-kept",
        "other-port",
        "other-scheme",
        "path-case-kept",
        "no-host",
        "not-text",
    ],
)
def test_one_endpoint_written_differently_has_one_key(url: object, key: str | None) -> None:
    assert endpoint_key(_simulator(url), url_option="url") == key


@pytest.mark.parametrize(
    ("connection", "key"),
    [
        (Connection(kind="cloud", options={"serial": " SN-1 "}), "cloud id:SN-1"),
        (Connection(kind="cloud", options={"serial": 42}), "cloud id:42"),
        (Connection(kind="cloud", options={"serial": ""}), None),
        (Connection(kind="cloud", options={"serial": True}), None),
        (Connection(kind="cloud", options={}), None),
        (Connection(kind="simulator", options={"url": "ws://h/"}), "simulator ws://h:80/"),
        (Connection(kind="mqtt", options={"url": "ws://h/"}), None),
    ],
    ids=["vendor-id", "numeric-id", "empty-id", "not-an-id", "no-id", "url-kind", "kind-unknown"],
)
def test_the_policy_keys_each_kind_by_what_names_its_device(
    connection: Connection, key: str | None
) -> None:
    policy = EndpointPolicy(HOSTS, {"simulator": "url"}, {"cloud": "serial"})
    assert policy.key(connection) == key


def test_a_long_endpoint_is_keyed_by_its_digest_however_it_is_written() -> None:
    long = "ws://h/" + "a" * 3000
    key = endpoint_key(_simulator(long), url_option="url")
    assert key is not None
    assert key.startswith("simulator sha256:")
    assert len(key) < 100
    assert endpoint_key(_simulator(long.replace("ws://h", "WS://H.:80")), url_option="url") == key
    assert endpoint_key(_simulator(long + "b"), url_option="url") != key


def test_the_same_url_under_two_kinds_is_two_endpoints() -> None:
    url = f"ws://127.0.0.1:8090/mowers/{MOWER}/ws"
    one = endpoint_key(Connection(kind="simulator", options={"url": url}), url_option="url")
    other = endpoint_key(Connection(kind="relay", options={"url": url}), url_option="url")
    assert one is not None
    assert other is not None
    assert one != other
