"""The channels' shared HTTP client and how an HTTP answer becomes a ``DeliveryResult``.

The session's resolver refuses names that resolve to non-public addresses on every
connection (``targets.resolve_public``), so DNS rebinding after validation gets nowhere.
IP literals never reach a resolver; the channels check every URL with the policy first.
"""

from __future__ import annotations

import asyncio
import functools
import socket
import time
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime

import aiohttp
import yarl
from aiohttp.abc import AbstractResolver, ResolveResult

from mowdeck.notifications.delivery.channels.port import DeliveryResult
from mowdeck.notifications.delivery.channels.settings import ChannelSettings
from mowdeck.notifications.delivery.targets import (
    ForbiddenAddressError,
    TargetPolicy,
    resolve_public,
)

__all__ = [
    "GuardedResolver",
    "common_answer",
    "failure_of",
    "open_channel_session",
    "parse_retry_after",
    "post",
]

MAX_RETRY_AFTER = 86400.0


class GuardedResolver(AbstractResolver):
    """Resolves with ``loop.getaddrinfo`` and refuses non-public answers (unless exempt)."""

    def __init__(self, policy: TargetPolicy) -> None:
        self._policy = policy

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """The addresses of ``host``; ``ForbiddenAddressError`` for a refused one."""
        infos = await resolve_public(host, port, self._policy, family=family)
        return [
            ResolveResult(
                hostname=host,
                host=str(sockaddr[0]),
                port=int(sockaddr[1]),
                family=fam,
                proto=proto,
                flags=socket.AI_NUMERICHOST | socket.AI_NUMERICSERV,
            )
            for fam, _type, proto, _canon, sockaddr in infos
        ]

    async def close(self) -> None:
        """Nothing to release."""


def open_channel_session(settings: ChannelSettings) -> aiohttp.ClientSession:
    """The one HTTP session all channels share (call on the event loop; close at stop)."""
    connector = aiohttp.TCPConnector(
        resolver=GuardedResolver(TargetPolicy.from_settings(settings)),
        limit=settings.notifications_http_connections,
        # Answers are cached by aiohttp only after the resolver accepted them.
        ttl_dns_cache=10,
    )
    return aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=settings.notifications_send_timeout_seconds),
        auto_decompress=False,
    )


def parse_retry_after(value: str | None, now: float) -> float | None:
    """``Retry-After`` (seconds or an HTTP date) as seconds from ``now``; None if absent."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), MAX_RETRY_AFTER)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return min(max(when.timestamp() - now, 0.0), MAX_RETRY_AFTER)


StatusMap = Callable[[int, Mapping[str, str]], DeliveryResult]


async def post(
    session: aiohttp.ClientSession,
    url: str | yarl.URL,
    *,
    data: bytes,
    headers: Mapping[str, str],
    timeout: float,
    answer: StatusMap,
) -> DeliveryResult:
    """POST once, never following redirects, and map the answer (or the failure)."""
    try:
        async with session.post(
            url,
            data=data,
            headers=headers,
            allow_redirects=False,
            timeout=_timeout(timeout),
        ) as response:
            await response.read()
            return answer(response.status, response.headers)
    except (aiohttp.ClientError, OSError, TimeoutError) as err:
        return failure_of(err, timeout)


@functools.lru_cache(maxsize=64)
def _timeout(seconds: float) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(total=seconds)


def failure_of(err: BaseException, timeout: float) -> DeliveryResult:
    """A send that got no answer: refused addresses fail, the rest is transient."""
    cause = getattr(err, "os_error", None) or err.__cause__
    if isinstance(err, ForbiddenAddressError) or isinstance(cause, ForbiddenAddressError):
        return DeliveryResult(status="failed", reason=f"refused: {cause or err}")
    if isinstance(err, TimeoutError | asyncio.TimeoutError):
        return DeliveryResult(status="retry", reason=f"no answer within {timeout:g} s")
    return DeliveryResult(status="retry", reason=f"connection failed: {type(err).__name__}")


def common_answer(
    status: int, headers: Mapping[str, str], *, now: Callable[[], float] = time.time
) -> DeliveryResult | None:
    """The mapping every HTTP channel shares: 2xx, 3xx, 429 and 5xx (None: the rest)."""
    if 200 <= status < 300:
        return DeliveryResult(status="sent", http_status=status)
    if 300 <= status < 400:
        return DeliveryResult(status="failed", http_status=status, reason="redirect not followed")
    if status == 429 or status >= 500:
        return DeliveryResult(
            status="retry",
            http_status=status,
            retry_after=parse_retry_after(headers.get("Retry-After"), now()),
            reason="rate limited" if status == 429 else "server error",
        )
    return None
