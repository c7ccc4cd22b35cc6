"""Rate limits at the HTTP edge: a named limit per principal, its 429 and its metric.

A refusal is ``429 Too Many Requests`` as ``application/problem+json`` with type
``rate-limited``, ``Retry-After`` in whole seconds (rounded up: a client that waits that
long finds a token), and the limit's name. It tells the caller about their own bucket
only: never whose requests emptied a shared one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter

from mowdeck.kit.http import Problem
from mowdeck.kit.ratelimit._bucket import Limit
from mowdeck.kit.ratelimit._ports import Limiter

__all__ = ["RateLimit", "RateLimitMetrics", "RequestLimit", "rate_limited"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def rate_limited(name: str, retry_after: float, detail: str) -> Problem:
    """The 429 problem of limit ``name``; retry after ``retry_after`` seconds."""
    seconds = max(1, math.ceil(retry_after))
    return Problem(
        429,
        "Too Many Requests",
        f"{detail}; retry in {seconds} s",
        type_="rate-limited",
        extra={"limit": name, "retry_after": seconds},
        headers={"Retry-After": str(seconds)},
    )


class RateLimitMetrics:
    """``mowdeck_<service>_rate_limited_total{limit}``: requests refused, by limit."""

    def __init__(self, registry: CollectorRegistry, *, service: str) -> None:
        self.refused = Counter(
            f"mowdeck_{service}_rate_limited",
            "Requests refused by a rate limit (429), by limit.",
            ["limit"],
            registry=registry,
        )


@dataclass
class RateLimit:
    """Limit ``name``: ``limit`` per key, kept by ``limiter``; ``what`` names the requests
    in a refusal ("commands for this user")."""

    name: str
    limit: Limit
    limiter: Limiter
    metrics: RateLimitMetrics
    what: str
    clock: Callable[[], float] = time.time
    _refused: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._refused = self.metrics.refused.labels(self.name)

    async def check(self, key: str) -> None:
        """Take a token from ``key``'s bucket; a 429 ``Problem`` when there is none."""
        if self.limit.off:
            return
        # Named, so limits sharing a limiter (and a table) never share a bucket.
        verdict = await self.limiter.take(f"{self.name}:{key}", self.limit, self.clock())
        if verdict.allowed:
            return
        self._refused.inc()
        raise rate_limited(
            self.name,
            verdict.retry_after,
            f"too many {self.what}: at most {self.limit.rate:g} a second, "
            f"{self.limit.burst:g} at once",
        )


@dataclass(frozen=True)
class RequestLimit:
    """A ``RateLimit`` keyed by something of the request (its user, its address)."""

    limit: RateLimit
    key: Callable[[web.Request], str]

    async def check(self, request: web.Request) -> None:
        """A 429 ``Problem`` when the request's key has no token left."""
        await self.limit.check(self.key(request))

    def guard(self, handler: Handler) -> Handler:
        """``handler``, answered only once the request passed the limit."""

        async def limited(request: web.Request) -> web.StreamResponse:
            await self.check(request)
            return await handler(request)

        return limited
