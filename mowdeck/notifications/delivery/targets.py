"""Channel targets and the policy that keeps them off internal addresses (SSRF).

A target is the document a user registers for a channel: a browser's
``PushSubscription.toJSON()`` for ``webpush``, a server and topic for ``ntfy``.
``validate_target`` checks one without I/O; ``check_target_addresses`` resolves its host
(call it when the target is registered); ``resolve_public`` is the same check the
channels' HTTP client makes on every connection, so a name that resolves elsewhere later
(DNS rebinding) is still refused.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgspec
import yarl
from cryptography.hazmat.primitives.asymmetric import ec

from mowdeck.errors import MowdeckError
from mowdeck.notifications.delivery.channels.settings import ChannelSettings

__all__ = [
    "ForbiddenAddressError",
    "HostPattern",
    "NtfyTarget",
    "Target",
    "TargetPolicy",
    "Violation",
    "WebPushKeys",
    "WebPushSubscription",
    "WebPushTarget",
    "b64url_decode",
    "check_target_addresses",
    "check_url",
    "is_public_address",
    "normalise_server",
    "resolve_public",
    "target_url",
    "validate_target",
]

DEFAULT_PORTS = {"http": 80, "https": 443}
NTFY_TOPIC = re.compile(r"[-_A-Za-z0-9]{1,64}")
# Header-safe token characters (no whitespace, no CR/LF): ntfy's tk_... and others.
TOKEN = re.compile(r"[A-Za-z0-9._~+/=-]{1,256}")
HOST_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")
MAX_ENDPOINT_LENGTH = 2048
WHITESPACE = re.compile(r"\s")

Getaddrinfo = Callable[..., Awaitable[list[tuple[Any, ...]]]]


class Violation(NamedTuple):
    """One thing wrong with a target document: the field (dotted path) and why."""

    field: str
    reason: str


class ForbiddenAddressError(MowdeckError, OSError):
    """A host resolves to an address the policy refuses (private, loopback, ...)."""


class WebPushKeys(msgspec.Struct, frozen=True):
    """The subscription's keys: the browser's P-256 public key and its auth secret."""

    p256dh: str
    auth: str


class WebPushSubscription(msgspec.Struct, frozen=True):
    """A browser push subscription (``PushSubscription.toJSON()`` without expiry)."""

    endpoint: str
    keys: WebPushKeys


class WebPushTarget(msgspec.Struct, frozen=True, tag_field="channel", tag="webpush"):
    """Push to one browser through its push service."""

    subscription: WebPushSubscription


class NtfyTarget(msgspec.Struct, frozen=True, tag_field="channel", tag="ntfy"):
    """Publish to a topic of an allowed ntfy server, optionally with an access token."""

    server: str
    topic: str
    token: str | None = None

    def __repr__(self) -> str:
        token = "<set>" if self.token else None
        return f"NtfyTarget(server={self.server!r}, topic={self.topic!r}, token={token})"


class LogTarget(msgspec.Struct, frozen=True, tag_field="channel", tag="log"):
    """The service's own log (development: the rendered message as a log line).

    Accepted only while the ``log`` channel is enabled (``MOWDECK_NOTIFICATIONS_CHANNELS``),
    which production leaves out."""


Target = WebPushTarget | NtfyTarget | LogTarget


@dataclass(frozen=True)
class HostPattern:
    """``host``, ``host:port`` or ``*.suffix`` (names below the suffix, not itself)."""

    host: str
    port: int | None
    suffix: bool

    @classmethod
    def parse(cls, text: str) -> HostPattern:
        """The pattern of an allow-list entry."""
        text = text.strip().lower()
        host, port = text, None
        if text.startswith("["):
            inner, _, rest = text[1:].partition("]")
            host = inner
            if rest.startswith(":"):
                port = int(rest[1:])
        elif text.count(":") == 1:
            host, _, port_text = text.partition(":")
            port = int(port_text)
        suffix = host.startswith("*.")
        return cls(host[2:] if suffix else host, port, suffix)

    def matches(self, host: str, port: int) -> bool:
        """Whether ``host:port`` is allowed; an entry without a port allows any port."""
        if self.port is not None and port != self.port:
            return False
        if self.suffix:
            return host.endswith("." + self.host)
        return host == self.host


@dataclass(frozen=True)
class TargetPolicy:
    """Where targets may point; built once from the settings."""

    push_hosts: tuple[HostPattern, ...]
    ntfy_servers: frozenset[str]
    insecure_hosts: tuple[HostPattern, ...]
    log_targets: bool = False

    @classmethod
    def from_settings(cls, settings: ChannelSettings) -> TargetPolicy:
        """The policy of ``settings`` (an invalid ntfy server entry raises ValueError)."""
        servers = set()
        for entry in settings.notifications_ntfy_servers:
            normal = normalise_server(entry)
            if isinstance(normal, str) and normal.startswith(("http://", "https://")):
                servers.add(normal)
            else:
                raise ValueError(f"MOWDECK_NOTIFICATIONS_NTFY_SERVERS: {entry!r}: {normal}")
        return cls(
            push_hosts=tuple(HostPattern.parse(p) for p in settings.notifications_push_hosts),
            ntfy_servers=frozenset(servers),
            insecure_hosts=tuple(
                HostPattern.parse(p) for p in settings.notifications_insecure_hosts
            ),
            log_targets="log" in settings.notifications_channels,
        )

    def insecure(self, host: str, port: int) -> bool:
        """Whether ``host:port`` is exempt (may use http and non-public addresses)."""
        return any(p.matches(host, port) for p in self.insecure_hosts)


def is_public_address(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether an address is global unicast (not private, loopback, link-local, ...)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


def _ip_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


class _Origin(NamedTuple):
    scheme: str
    host: str
    port: int
    path: str


def _parse(url: str) -> _Origin | str:  # noqa: PLR0911 - one return per refusal
    """The origin of ``url`` as aiohttp will see it, or why it is refused."""
    if not url.isascii() or WHITESPACE.search(url):
        return "must be an ASCII URL without spaces"
    try:
        parsed = yarl.URL(url)
    except (ValueError, TypeError) as err:
        return f"is not a URL ({err})"
    if parsed.scheme not in DEFAULT_PORTS:
        return "must be an https URL"
    if parsed.user is not None or parsed.password is not None or "@" in (parsed.raw_authority):
        return "must not contain user information"
    host = parsed.raw_host
    if not host or parsed.port is None:
        return "has no host"
    if _ip_literal(host) is None:
        labels = host.split(".")
        if not all(HOST_LABEL.fullmatch(label) for label in labels):
            return f"has an invalid host name {host!r}"
    return _Origin(parsed.scheme, host, parsed.port, parsed.raw_path)


def check_url(url: str, patterns: Sequence[HostPattern], policy: TargetPolicy) -> str | None:
    """Why ``url`` may not be called under ``policy`` with host ``patterns``, or None (the
    webpush channel keeps its answers per endpoint: it checks before every send)."""
    origin = _parse(url)
    if isinstance(origin, str):
        return origin
    return _check_origin(origin, patterns, policy)


def _check_origin(
    origin: _Origin, patterns: Sequence[HostPattern], policy: TargetPolicy
) -> str | None:
    exempt = policy.insecure(origin.host, origin.port)
    if origin.scheme != "https" and not exempt:
        return "must be an https URL"
    if not any(p.matches(origin.host, origin.port) for p in patterns):
        return f"host {_hostport(origin)} is not an allowed push service"
    literal = _ip_literal(origin.host)
    if literal is not None and not exempt and not is_public_address(literal):
        return f"address {origin.host} is not public"
    return None


def _hostport(origin: _Origin) -> str:
    host = f"[{origin.host}]" if ":" in origin.host else origin.host
    return host if origin.port == DEFAULT_PORTS[origin.scheme] else f"{host}:{origin.port}"


def normalise_server(url: str) -> str:
    """An ntfy base URL as ``scheme://host[:port]`` (default port dropped), or why not."""
    origin = _parse(url)
    if isinstance(origin, str):
        return origin
    if origin.path not in ("", "/"):
        return "must be a server root URL without a path"
    return f"{origin.scheme}://{_hostport(origin)}"


def b64url_decode(text: str) -> bytes:
    """Base64url with or without padding; raises ValueError on anything else."""
    if not re.fullmatch(r"[A-Za-z0-9_-]*={0,2}", text):
        raise ValueError("not base64url")
    try:
        return base64.urlsafe_b64decode(text.rstrip("=") + "=" * (-len(text.rstrip("=")) % 4))
    except binascii.Error as err:
        raise ValueError(str(err)) from err


def _check_p256dh(value: object) -> str | None:
    if not isinstance(value, str):
        return "must be a base64url string"
    try:
        raw = b64url_decode(value)
        if len(raw) != 65 or raw[0] != 4:
            return "must be an uncompressed P-256 point (65 bytes)"
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), raw)
    except ValueError:
        return "must be an uncompressed P-256 point in base64url"
    return None


def _check_auth(value: object) -> str | None:
    if not isinstance(value, str):
        return "must be a base64url string"
    try:
        raw = b64url_decode(value)
    except ValueError:
        return "must be base64url"
    return None if len(raw) == 16 else "must be 16 bytes"


def _webpush(doc: Mapping[str, Any], policy: TargetPolicy) -> WebPushTarget | list[Violation]:
    sub = doc.get("subscription")
    if not isinstance(sub, Mapping):
        return [Violation("subscription", "must be an object (PushSubscription.toJSON())")]
    violations = []
    endpoint = sub.get("endpoint")
    if not isinstance(endpoint, str) or not endpoint:
        violations.append(Violation("subscription.endpoint", "must be a URL"))
    elif len(endpoint) > MAX_ENDPOINT_LENGTH:
        violations.append(Violation("subscription.endpoint", "is too long"))
    elif (why := check_url(endpoint, policy.push_hosts, policy)) is not None:
        violations.append(Violation("subscription.endpoint", why))
    keys = sub.get("keys")
    if not isinstance(keys, Mapping):
        violations.append(Violation("subscription.keys", "must be an object with p256dh and auth"))
    else:
        for name, check in (("p256dh", _check_p256dh), ("auth", _check_auth)):
            if (why := check(keys.get(name))) is not None:
                violations.append(Violation(f"subscription.keys.{name}", why))
    if violations:
        return violations
    assert isinstance(keys, Mapping) and isinstance(endpoint, str)  # noqa: PT018 - narrowed
    return WebPushTarget(WebPushSubscription(endpoint, WebPushKeys(keys["p256dh"], keys["auth"])))


def _ntfy(doc: Mapping[str, Any], policy: TargetPolicy) -> NtfyTarget | list[Violation]:
    violations = []
    server, topic, token = doc.get("server"), doc.get("topic"), doc.get("token")
    normal = normalise_server(server) if isinstance(server, str) else "must be a URL"
    if not normal.startswith(("http://", "https://")):
        violations.append(Violation("server", normal))
    elif normal not in policy.ntfy_servers:
        violations.append(Violation("server", f"{normal} is not an allowed ntfy server"))
    else:
        origin = _parse(normal)
        assert isinstance(origin, _Origin)
        exempt = policy.insecure(origin.host, origin.port)
        literal = _ip_literal(origin.host)
        if origin.scheme != "https" and not exempt:
            violations.append(Violation("server", "must be an https URL"))
        elif literal is not None and not exempt and not is_public_address(literal):
            violations.append(Violation("server", f"address {origin.host} is not public"))
    if not isinstance(topic, str) or not NTFY_TOPIC.fullmatch(topic):
        violations.append(Violation("topic", "must be 1-64 characters of A-Z, a-z, 0-9, - and _"))
    if token is not None and (not isinstance(token, str) or not TOKEN.fullmatch(token)):
        violations.append(Violation("token", "must be an access token (no spaces, at most 256)"))
    if violations:
        return violations
    assert isinstance(topic, str)
    return NtfyTarget(normal, topic, token)


def validate_target(doc: object, policy: TargetPolicy) -> Target | list[Violation]:
    """The target of ``doc``, or every violation found (for a 422 naming the fields)."""
    if not isinstance(doc, Mapping):
        return [Violation("", "must be an object")]
    match doc.get("channel"):
        case "webpush":
            return _webpush(doc, policy)
        case "ntfy":
            return _ntfy(doc, policy)
        case "log" if policy.log_targets:
            extra = sorted(set(doc) - {"channel"})
            return [Violation(f, "unknown field") for f in extra] if extra else LogTarget()
        case _:
            allowed = "webpush, ntfy, log" if policy.log_targets else "webpush, ntfy"
            return [Violation("channel", f"must be one of: {allowed}")]


def target_url(target: Target) -> str:
    """The URL a target's channel connects to."""
    if isinstance(target, WebPushTarget):
        return target.subscription.endpoint
    if isinstance(target, LogTarget):
        return "log:"
    return target.server


async def resolve_public(
    host: str,
    port: int,
    policy: TargetPolicy,
    *,
    family: int = socket.AF_UNSPEC,
    getaddrinfo: Getaddrinfo | None = None,
) -> list[tuple[Any, ...]]:
    """``getaddrinfo`` of ``host``, refused unless every address is public or exempt."""
    lookup = getaddrinfo or asyncio.get_running_loop().getaddrinfo
    try:
        infos = await lookup(host, port, family=family, type=socket.SOCK_STREAM)
    except OSError as err:
        raise OSError(f"cannot resolve {host}: {err}") from err
    if policy.insecure(host, port):
        return infos
    for info in infos:
        address = ipaddress.ip_address(info[4][0].split("%")[0])
        if not is_public_address(address):
            raise ForbiddenAddressError(f"{host} resolves to {address}, which is not public")
    return infos


async def check_target_addresses(
    target: Target, policy: TargetPolicy, *, getaddrinfo: Getaddrinfo | None = None
) -> list[Violation]:
    """The violation of a target whose host resolves to a refused address (or not at all)."""
    if isinstance(target, LogTarget):
        return []  # nothing is dialled
    field = "subscription.endpoint" if isinstance(target, WebPushTarget) else "server"
    origin = _parse(target_url(target))
    if isinstance(origin, str):
        return [Violation(field, origin)]
    try:
        await resolve_public(origin.host, origin.port, policy, getaddrinfo=getaddrinfo)
    except ForbiddenAddressError as err:
        return [Violation(field, str(err))]
    except OSError as err:
        return [Violation(field, str(err))]
    return []
