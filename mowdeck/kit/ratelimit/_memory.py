"""Token buckets in a dict: one process's limits, tests, and the shared store's stand-in."""

from __future__ import annotations

from mowdeck.kit.ratelimit._bucket import Bucket, Limit, Verdict, take, take_many
from mowdeck.kit.ratelimit._ports import TokenStore

__all__ = ["MemoryLimiter"]

_FIRST_SWEEP = 4096


class MemoryLimiter(TokenStore):
    """Buckets in this process; idle ones are swept as the dict grows.

    A key seen once stays until its bucket is full again; the dict is swept when it has
    doubled since the last sweep, so its size follows the keys active within a refill
    time, however many keys have come and gone.
    """

    def __init__(self) -> None:
        # Each bucket with the time it is full again, so a sweep needs no limit.
        self._buckets: dict[str, tuple[Bucket, float]] = {}
        self._sweep_at = _FIRST_SWEEP

    def __len__(self) -> int:
        return len(self._buckets)

    def take_now(self, key: str, limit: Limit, now: float) -> Verdict:
        """``take`` without a suspension point (the fallback's local answer)."""
        found = self._buckets.get(key)
        bucket, verdict = take(None if found is None else found[0], limit, now)
        self._keep(key, bucket, limit, now)
        return verdict

    async def take(self, key: str, limit: Limit, now: float) -> Verdict:
        """Take one token from ``key``'s bucket."""
        return self.take_now(key, limit, now)

    async def take_many(self, key: str, limit: Limit, now: float, count: int) -> tuple[float, int]:
        """``count`` takes from ``key``'s bucket at once."""
        found = self._buckets.get(key)
        bucket, granted = take_many(None if found is None else found[0], limit, now, count)
        self._keep(key, bucket, limit, now)
        return bucket.tokens, granted

    def _keep(self, key: str, bucket: Bucket, limit: Limit, now: float) -> None:
        self._buckets[key] = (bucket, bucket.full_at(limit))
        if len(self._buckets) >= self._sweep_at:
            self._sweep(now)
            self._sweep_at = max(_FIRST_SWEEP, 2 * len(self._buckets))

    async def expire(self, now: float) -> int:
        """Forget the buckets full again by ``now``."""
        return self._sweep(now)

    def _sweep(self, now: float) -> int:
        full = [key for key, (_, full_at) in self._buckets.items() if full_at <= now]
        for key in full:
            del self._buckets[key]
        return len(full)
