"""A shared limiter that falls back to this process's buckets when its store fails.

Rate limits protect the service; they must not become a way for it to fail. When the
shared store errs or does not answer within ``timeout``, the take is answered from a
local bucket with the same limit (each replica then limits on its own, so the whole may
pass up to that many times the limit), and the store is left to rest for ``rest``
seconds, so that requests do not each wait out the timeout while it is down. A shared
limiter that bounds its own waits (``BatchingLimiter(timeout=...)``, one timer per
write) needs no ``timeout`` here, where it would cost a timer per take.
"""

from __future__ import annotations

import asyncio

import structlog
from prometheus_client import Counter

from mowdeck.kit.ratelimit._bucket import Limit, Verdict
from mowdeck.kit.ratelimit._memory import MemoryLimiter
from mowdeck.kit.ratelimit._ports import Limiter, LimiterUnavailableError

__all__ = ["FallbackLimiter"]

log = structlog.get_logger("mowdeck.ratelimit")


class FallbackLimiter(Limiter):
    """``shared``, or ``local`` while ``shared`` fails; fallbacks counted on ``fallbacks``."""

    def __init__(
        self,
        shared: Limiter,
        local: MemoryLimiter,
        *,
        timeout: float | None,
        fallbacks: Counter,
        rest: float = 5.0,
    ) -> None:
        self._shared = shared
        self._local = local
        self._timeout = timeout
        self._rest = rest
        self._fallbacks = fallbacks
        self._resting_until = float("-inf")

    @property
    def resting(self) -> bool:
        """True while the shared store is left alone after a failure (until a take after
        the rest)."""
        return self._resting_until > float("-inf")

    async def take(self, key: str, limit: Limit, now: float) -> Verdict:
        """The shared store's answer, or the local bucket's if it has none in time."""
        if now < self._resting_until:
            self._fallbacks.inc()
            return self._local.take_now(key, limit, now)
        try:
            if self._timeout is None:
                verdict = await self._shared.take(key, limit, now)
            else:
                async with asyncio.timeout(self._timeout):
                    verdict = await self._shared.take(key, limit, now)
        except (LimiterUnavailableError, TimeoutError) as err:
            if not self.resting:
                log.warning(
                    "rate limit store unavailable: limiting on this replica alone",
                    error=str(err) or type(err).__name__,
                    rest_seconds=self._rest,
                )
            self._resting_until = now + self._rest
            self._fallbacks.inc()
            return self._local.take_now(key, limit, now)
        if self.resting:
            log.info("rate limit store back: limiting across replicas again")
            self._resting_until = float("-inf")
        return verdict

    async def expire(self, now: float) -> int:
        """Expire both stores' idle buckets (the shared one's failure is raised)."""
        local = await self._local.expire(now)
        return local + await self._shared.expire(now)
