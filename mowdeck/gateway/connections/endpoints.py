"""Which device endpoints a connection may dial (``MOWDECK_GATEWAY_DEVICE_HOSTS``).

Pure rules shared by Fleet (a 422 at registration) and the gateway (a refusal at apply),
so both sides read a connection URL the same way. The URL is parsed with ``yarl``, the
parser aiohttp connects with: a check that reads a URL differently from the client that
dials it is no check.

Patterns are ``host``, ``host:port``, ``*.domain`` (with or without a port), an IP
literal (``10.0.0.7``, ``[fd00::7]:7001``) or a CIDR network (``10.20.0.0/16``, any
port). Names are matched as names and never resolved: a CIDR pattern matches only URLs
whose host is an IP literal. Resolving here would not bind the connection to the answer
(aiohttp resolves again when it connects), so an allowed name is trusted as far as the
DNS that serves it.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import yarl

from contracts.v1 import Connection

__all__ = [
    "DEVELOPMENT_DEVICE_HOSTS",
    "DeviceHosts",
    "EndpointPolicy",
    "EndpointRefusal",
]

# The simulator's default listen address (``mowdeck-sim --listen``): enough for
# development, never for a deployment, which lists its devices' hosts.
DEVELOPMENT_DEVICE_HOSTS = ("127.0.0.1:8090", "localhost:8090")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_NAME = re.compile(r"^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$")
_MAX_PORT = 65535


@dataclass(frozen=True, slots=True)
class _Pattern:
    name: str | None = None  # a lower-case host name, "*.domain" for any subdomain
    address: IPAddress | None = None
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None
    port: int | None = None  # None: any port

    def matches(self, host: str, address: IPAddress | None, port: int | None) -> bool:
        if self.port is not None and port != self.port:
            return False
        if self.network is not None:
            return address is not None and address in self.network
        if self.address is not None:
            return address == self.address
        if address is not None or self.name is None:
            return False
        if self.name.startswith("*."):
            return host.endswith(self.name[1:])
        return host == self.name


def _ip(text: str) -> IPAddress | None:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    # ::ffff:127.0.0.1 is 127.0.0.1 to the kernel; compare it as what it reaches.
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _port(text: str, pattern: str) -> int:
    if not text.isdigit() or not 0 < int(text) <= _MAX_PORT:
        raise ValueError(f"device host pattern {pattern!r}: port must be 1 to {_MAX_PORT}")
    return int(text)


def _parse(pattern: str) -> _Pattern:
    raw = pattern.strip().lower()
    if "/" in raw:
        try:
            return _Pattern(network=ipaddress.ip_network(raw.strip("[]"), strict=False))
        except ValueError as err:
            raise ValueError(f"device host pattern {pattern!r}: {err}") from None
    host, port = raw, None
    if raw.startswith("["):
        host, closed, rest = raw[1:].partition("]")
        if not closed:
            raise ValueError(f"device host pattern {pattern!r} is not host[:port]")
        if rest:
            if not rest.startswith(":"):
                raise ValueError(f"device host pattern {pattern!r} is not host[:port]")
            port = _port(rest[1:], pattern)
    elif raw.count(":") == 1:
        host, _, text = raw.partition(":")
        port = _port(text, pattern)
    address = _ip(host)
    if address is not None:
        return _Pattern(address=address, port=port)
    host = host.rstrip(".")
    if not _NAME.match(host):
        raise ValueError(f"device host pattern {pattern!r} is not a host name, address or CIDR")
    return _Pattern(name=host, port=port)


class DeviceHosts:
    """The hosts device connections may dial; ``refusal(url)`` says why one may not."""

    def __init__(self, patterns: Sequence[str]) -> None:
        """Parse ``patterns``; raises ``ValueError`` naming a pattern that is not one."""
        self.patterns = tuple(patterns)
        self._parsed = tuple(_parse(p) for p in patterns)

    def refusal(self, url: str) -> str | None:
        """Why ``url`` may not be dialled, or None when a pattern allows it."""
        try:
            parsed = yarl.URL(url)
            host, port = parsed.host, parsed.port
        except (ValueError, TypeError) as err:
            return f"is not a URL ({err})"
        if not host:
            return "names no host"
        host = host.rstrip(".")
        address = _ip(host)
        if any(p.matches(host, address, port) for p in self._parsed):
            return None
        where = f"{host}:{port}" if port is not None else host
        allowed = ", ".join(self.patterns) or "none"
        return f"dials {where}, which MOWDECK_GATEWAY_DEVICE_HOSTS does not allow ({allowed})"


@dataclass(frozen=True, slots=True)
class EndpointRefusal:
    """A connection option naming an endpoint that may not be dialled."""

    field: str  # dotted, as Fleet's 422 names it: ``connection.options.url``
    detail: str


@dataclass(frozen=True, slots=True)
class EndpointPolicy:
    """The device hosts, and which option of each connection kind is its endpoint URL."""

    hosts: DeviceHosts
    url_options: Mapping[str, str]  # kind -> option; kinds not listed dial nothing

    def refusal(self, connection: Connection) -> EndpointRefusal | None:
        """Why ``connection`` may not be opened, or None."""
        option = self.url_options.get(connection.kind)
        if option is None or option not in connection.options:
            return None  # nothing to dial; a required URL is the adapter's to demand
        field = f"connection.options.{option}"
        value = connection.options[option]
        if not isinstance(value, str):
            return EndpointRefusal(field, f"`{field}` must be a URL")
        why = self.hosts.refusal(value)
        return None if why is None else EndpointRefusal(field, f"`{field}` {why}")
