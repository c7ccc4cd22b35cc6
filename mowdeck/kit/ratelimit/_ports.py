"""The limiter ports: one token taken from a key's bucket, or many at once from a store."""

from __future__ import annotations

from typing import Protocol

from mowdeck.errors import MowdeckError
from mowdeck.kit.ratelimit._bucket import Limit, Verdict

__all__ = ["Limiter", "LimiterUnavailableError", "TokenStore"]


class LimiterUnavailableError(MowdeckError):
    """The store holding the buckets failed; the take neither passed nor was refused."""


class Limiter(Protocol):
    """Token buckets by key (``_bucket.take`` is the rule every adapter follows)."""

    async def take(self, key: str, limit: Limit, now: float) -> Verdict:
        """Take one token from ``key``'s bucket at ``now`` (``limit`` is never off)."""
        ...

    async def expire(self, now: float) -> int:
        """Forget the buckets that are full again by ``now``; how many went."""
        ...


class TokenStore(Limiter, Protocol):
    """A limiter that also takes several tokens of one key at once (``_bucket.take_many``),
    which is what lets ``BatchingLimiter`` answer concurrent takes with one write."""

    async def take_many(self, key: str, limit: Limit, now: float, count: int) -> tuple[float, int]:
        """``count`` takes at once: the tokens left after them and how many passed."""
        ...
