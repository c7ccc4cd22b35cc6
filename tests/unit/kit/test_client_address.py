"""The client of a request: never a forwarded address unless a trusted proxy forwarded it."""

from __future__ import annotations

import ipaddress

import pytest

from mowdeck.kit.client_address import TrustedProxies, client_key

NONE = TrustedProxies()
PROXIES = TrustedProxies(["10.0.0.0/8", "192.0.2.7"])


@pytest.mark.parametrize(
    ("proxies", "peer", "forwarded", "client"),
    [
        (NONE, "203.0.113.5", None, "203.0.113.5"),
        (NONE, "203.0.113.5", "198.51.100.1", "203.0.113.5"),
        (NONE, "10.0.0.1", "198.51.100.1", "10.0.0.1"),
        (PROXIES, "203.0.113.5", "198.51.100.1", "203.0.113.5"),
        (PROXIES, "10.0.0.1", "198.51.100.1", "198.51.100.1"),
        (PROXIES, "10.0.0.1", "1.1.1.1, 198.51.100.1", "198.51.100.1"),
        (PROXIES, "10.0.0.1", "198.51.100.1, 192.0.2.7, 10.9.9.9", "198.51.100.1"),
        (PROXIES, "10.0.0.1", "10.1.1.1, 10.2.2.2", "10.1.1.1"),
        (PROXIES, "10.0.0.1", "198.51.100.1, not-an-address", "10.0.0.1"),
        (PROXIES, "10.0.0.1", "", "10.0.0.1"),
        (PROXIES, "10.0.0.1", None, "10.0.0.1"),
        (PROXIES, "10.0.0.1", " 2001:db8::1 ", "2001:db8::1"),
        (PROXIES, "::ffff:10.0.0.1", "198.51.100.1", "198.51.100.1"),
        (NONE, None, "198.51.100.1", None),
        (NONE, "not-an-address", None, None),
    ],
    ids=[
        "no proxies: the peer",
        "no proxies: a forwarded address is ignored",
        "no proxies: even from a private peer",
        "an untrusted peer's header is ignored",
        "a trusted proxy's client",
        "what the client wrote itself, left of the proxy's entry, is ignored",
        "a chain of trusted proxies is walked back",
        "only trusted proxies: the farthest one",
        "junk ends the walk at the last trusted hop",
        "an empty header: the proxy",
        "no header: the proxy",
        "an IPv6 client",
        "an IPv4-mapped peer is IPv4",
        "no peer (a closed transport)",
        "a peer that is no IP address (a Unix socket)",
    ],
)
def test_client(
    proxies: TrustedProxies, peer: str | None, forwarded: str | None, client: str | None
) -> None:
    found = proxies.client(peer, forwarded)
    assert (None if found is None else str(found)) == client


@pytest.mark.parametrize(
    ("address", "key"),
    [
        ("198.51.100.1", "198.51.100.1"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff::1", "2001:db8:1:2::/64"),
    ],
    ids=["IPv4 by address", "IPv6 by its /64", "the same /64 is one key"],
)
def test_client_key(address: str, key: str) -> None:
    assert client_key(ipaddress.ip_address(address)) == key


def test_an_entry_that_is_no_network_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"'proxy\.local'"):
        TrustedProxies(["10.0.0.0/8", "proxy.local"])
