"""Which client sent a request: the peer's address, or what trusted proxies say it was.

``X-Forwarded-For`` is anyone's to write, so it is read only when the peer is one of the
proxies the operator named (``TrustedProxies``), and then from the right: each trusted
proxy appends the address it saw, so the first address from the right that is not a
trusted proxy is the client (what a client wrote further left is its own claim and
ignored). An entry that is no address ends the walk at the last proxy that could be
vouched for. With no trusted proxies the header is never read.

``client_key`` keys a rate limit by client: an IPv4 address, or the /64 network of an
IPv6 one (one subscriber usually holds a whole /64, and a limit per address would be one
per each of its 2**64 addresses).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from aiohttp import web

__all__ = ["TrustedProxies", "client_key"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_UNKNOWN = "unknown"


def _address(text: str) -> IPAddress | None:
    try:
        address = ipaddress.ip_address(text.strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


class TrustedProxies:
    """The proxies (addresses or networks, ``10.0.0.0/8``) whose forwarding is believed."""

    def __init__(self, networks: Iterable[str] = ()) -> None:
        """Raises ``ValueError`` naming an entry that is no address or network."""
        self._networks = []
        for entry in networks:
            try:
                self._networks.append(ipaddress.ip_network(entry.strip(), strict=False))
            except ValueError:
                raise ValueError(f"not an address or a network: {entry!r}") from None

    def trusts(self, address: IPAddress) -> bool:
        """Whether ``address`` is one of the trusted proxies."""
        return any(address in network for network in self._networks)

    def client(self, peer: str | None, forwarded_for: str | None) -> IPAddress | None:
        """The client's address, from the connection's ``peer`` and its forwarding header."""
        hop = None if peer is None else _address(peer)
        if hop is None or not self.trusts(hop) or not forwarded_for:
            return hop
        for entry in reversed(forwarded_for.split(",")):
            address = _address(entry)
            if address is None:
                return hop
            hop = address
            if not self.trusts(hop):
                return hop
        return hop

    def of(self, request: web.Request) -> str:
        """The rate-limit key of the client that sent ``request``."""
        forwarded = request.headers.get("X-Forwarded-For") if self._networks else None
        address = self.client(request.remote, forwarded)
        return _UNKNOWN if address is None else client_key(address)


def client_key(address: IPAddress) -> str:
    """An IPv4 address as itself, an IPv6 one as its /64 network."""
    if isinstance(address, ipaddress.IPv4Address):
        return str(address)
    return str(ipaddress.IPv6Network((address, 64), strict=False))
