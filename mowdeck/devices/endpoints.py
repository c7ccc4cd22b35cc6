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

``endpoint_key`` names the device a connection reaches, the same however its URL is
written: one registration holds a device endpoint (Fleet's unique index, the gateway's
refusal at apply), so two mowers never dial one device and replace each other's link.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
import urllib.parse
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import msgspec
import yarl

from contracts.v1 import Connection

__all__ = [
    "DEVELOPMENT_DEVICE_HOSTS",
    "DeviceHosts",
    "EndpointPolicy",
    "EndpointRefusal",
    "endpoint_key",
    "normalised_url",
]

# The simulator's default listen address (``mowdeck-sim --listen``): enough for
# development, never for a deployment, which lists its devices' hosts.
DEVELOPMENT_DEVICE_HOSTS = ("127.0.0.1:8090", "localhost:8090")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# A longer endpoint key is kept as its digest: a btree index entry holds about 2.7 kB, and
# connection options may hold 16 KiB.
_KEY_BYTES = 1024
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


def _segment(raw: str) -> str:
    # An id in a path is often read by a UUID parser, which takes upper case, braces, a
    # urn: prefix and hyphens anywhere (the simulator reads /mowers/{mower_id}/ws so):
    # every spelling of one UUID is one segment here.
    try:
        return str(uuid.UUID(urllib.parse.unquote(raw)))
    except ValueError:
        return raw


def normalised_url(url: str) -> str | None:
    """``url`` written one way (scheme and host in lower case, no trailing dot, the port
    always, IPv4-mapped IPv6 as IPv4, ``/`` for an empty path, UUIDs in the path in their
    canonical form, no user or fragment); None when it is not a URL with a host."""
    try:
        parsed = yarl.URL(url)
        host, port = parsed.host, parsed.port
    except (ValueError, TypeError):
        return None
    if not host or not parsed.scheme:
        return None
    host = host.rstrip(".")
    address = _ip(host)
    if address is not None:
        host = f"[{address}]" if isinstance(address, ipaddress.IPv6Address) else str(address)
    where = host if port is None else f"{host}:{port}"
    # yarl has decoded what needs no percent-encoding and removed dot segments.
    path = "/".join(_segment(part) for part in parsed.raw_path.split("/"))
    query = f"?{parsed.raw_query_string}" if parsed.raw_query_string else ""
    return f"{parsed.scheme.lower()}://{where}{path or '/'}{query}"


def endpoint_key(
    connection: Connection,
    *,
    url_option: str | None = None,
    device_id_option: str | None = None,
    scope_option: str | None = None,
) -> str | None:
    """The device ``connection`` reaches, as one string however it is written.

    ``<kind> <normalised URL>`` for a kind whose ``url_option`` holds the device's URL
    (followed by `` scope:<value>`` when the kind's ``scope_option`` tells devices behind
    that URL apart, as an MQTT topic prefix does: trailing slashes never count),
    ``<kind> id:<id>`` for a kind that names the device by a vendor id in
    ``device_id_option``, ``<kind> sha256:<hex>`` of that for one longer than 1 KiB; None
    when the connection names neither (nothing to hold).
    """
    options = connection.options
    identity: str | None = None
    if url_option is not None and isinstance(value := options.get(url_option), str):
        identity = normalised_url(value)
        scope = options.get(scope_option) if scope_option is not None else None
        if identity is not None and isinstance(scope, str) and scope.strip().strip("/"):
            identity = f"{identity} scope:{scope.strip().strip('/')}"
    elif device_id_option is not None:
        device = options.get(device_id_option)
        if isinstance(device, str) and device.strip():
            identity = f"id:{device.strip()}"
        elif isinstance(device, int) and not isinstance(device, bool):
            identity = f"id:{device}"
    if identity is None:
        return None
    key = f"{connection.kind} {identity}"
    if len(key.encode()) <= _KEY_BYTES:
        return key
    return f"{connection.kind} sha256:{hashlib.sha256(identity.encode()).hexdigest()}"


@dataclass(frozen=True, slots=True)
class EndpointPolicy:
    """The device hosts, and which option of each connection kind names its device."""

    hosts: DeviceHosts
    url_options: Mapping[str, str]  # kind -> option; kinds not listed dial nothing
    # kind -> option holding a vendor's device id, for kinds that name a device so
    device_id_options: Mapping[str, str] = field(default_factory=dict)
    # kind -> option telling devices behind one URL apart (``ConnectionKind.scope_option``)
    scope_options: Mapping[str, str] = field(default_factory=dict)
    # kind -> the struct its options must convert to (``ConnectionKind.options``)
    option_types: Mapping[str, type[msgspec.Struct]] = field(default_factory=dict)

    def device_option(self, kind: str) -> str | None:
        """The option naming the device of ``kind`` (its URL or its id), if any."""
        return self.url_options.get(kind) or self.device_id_options.get(kind)

    def key(self, connection: Connection) -> str | None:
        """The endpoint ``connection`` holds (``endpoint_key``), or None."""
        return endpoint_key(
            connection,
            url_option=self.url_options.get(connection.kind),
            device_id_option=self.device_id_options.get(connection.kind),
            scope_option=self.scope_options.get(connection.kind),
        )

    def options_refusal(self, connection: Connection) -> EndpointRefusal | None:
        """Why the options of ``connection`` are not its kind's, or None."""
        kind_type = self.option_types.get(connection.kind)
        if kind_type is None:
            return None
        try:
            msgspec.convert(connection.options, kind_type)
        except msgspec.ValidationError as err:
            return _option_error(str(err))
        return None

    def refusal(self, connection: Connection) -> EndpointRefusal | None:
        """Why ``connection`` may not be opened (malformed options, a host not allowed)."""
        malformed = self.options_refusal(connection)
        if malformed is not None:
            return malformed
        option = self.url_options.get(connection.kind)
        if option is None or option not in connection.options:
            return None  # nothing to dial; a required URL is the adapter's to demand
        field = f"connection.options.{option}"
        value = connection.options[option]
        if not isinstance(value, str):
            return EndpointRefusal(field, f"`{field}` must be a URL")
        why = self.hosts.refusal(value)
        return None if why is None else EndpointRefusal(field, f"`{field}` {why}")


_AT = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_MISSING = re.compile(r"^Object missing required field `(?P<name>[^`]+)`")


def _option_error(message: str) -> EndpointRefusal:
    """A msgspec validation message as the option it names (``$.datum.lat``)."""
    path = ""
    found = _AT.search(message)
    if found is not None:
        path = found.group("path")
        message = message[: found.start()]
    missing = _MISSING.match(message)
    if missing is not None:
        path = f"{path}.{missing.group('name')}"
    dotted = re.sub(r"\[(\d+)\]", r".\1", path)
    where = f"connection.options{dotted}"
    return EndpointRefusal(where, f"`{where}`: {message}")
