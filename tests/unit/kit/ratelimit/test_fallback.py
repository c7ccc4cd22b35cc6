"""The shared limiter's fallback: a failing or hung store is answered by local buckets."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry, Counter
from structlog.testing import capture_logs

from mowdeck.kit.ratelimit import (
    FallbackLimiter,
    Limit,
    Limiter,
    LimiterUnavailableError,
    MemoryLimiter,
    Verdict,
)

LIMIT = Limit(rate=1, burst=3)


class BrokenStore(Limiter):
    """A shared store that fails every call until mended, counting the calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.broken = True
        self.working = MemoryLimiter()

    async def take(self, key: str, limit: Limit, now: float) -> Verdict:
        self.calls += 1
        if self.broken:
            raise LimiterUnavailableError("connection refused")
        return await self.working.take(key, limit, now)

    async def expire(self, now: float) -> int:
        if self.broken:
            raise LimiterUnavailableError("connection refused")
        return await self.working.expire(now)


class HungStore(Limiter):
    """A shared store that never answers a take."""

    async def take(self, key: str, limit: Limit, now: float) -> Verdict:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def expire(self, now: float) -> int:
        return 0


def counter() -> Counter:
    return Counter("fallbacks", "test", registry=CollectorRegistry())


def counted(fallbacks: Counter) -> float:
    """What the counter shows, as a scrape would."""
    return sum(s.value for m in fallbacks.collect() for s in m.samples if s.name.endswith("_total"))


async def test_a_failing_store_is_answered_by_a_local_bucket_with_the_same_limit() -> None:
    store, fallbacks = BrokenStore(), counter()
    limiter = FallbackLimiter(store, MemoryLimiter(), timeout=1, fallbacks=fallbacks, rest=5)
    with capture_logs() as logs:
        answers = [(await limiter.take("account:a", LIMIT, 100.0)).allowed for _ in range(4)]
    assert answers == [True, True, True, False]
    assert counted(fallbacks) == 4
    # Asked once; then left to rest, and the failure logged once.
    assert store.calls == 1
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == [
        "rate limit store unavailable: limiting on this replica alone"
    ]


async def test_after_its_rest_the_store_is_asked_again_and_its_recovery_logged() -> None:
    store = BrokenStore()
    limiter = FallbackLimiter(store, MemoryLimiter(), timeout=1, fallbacks=counter(), rest=5)
    await limiter.take("k", LIMIT, 100.0)
    await limiter.take("k", LIMIT, 104.9)
    assert store.calls == 1
    store.broken = False
    with capture_logs() as logs:
        assert (await limiter.take("k", LIMIT, 105.0)).allowed
    assert store.calls == 2
    assert not limiter.resting
    assert "rate limit store back: limiting across replicas again" in [e["event"] for e in logs]
    # The shared bucket counts from here: three in its burst, as if new.
    answers = [(await limiter.take("k", LIMIT, 105.0)).allowed for _ in range(3)]
    assert answers == [True, True, False]


async def test_a_store_that_does_not_answer_in_time_is_answered_locally() -> None:
    fallbacks = counter()
    limiter = FallbackLimiter(HungStore(), MemoryLimiter(), timeout=0.05, fallbacks=fallbacks)
    async with asyncio.timeout(2):
        verdict = await limiter.take("k", LIMIT, 100.0)
    assert verdict.allowed
    assert counted(fallbacks) == 1
    assert limiter.resting


async def test_expiry_expires_the_local_buckets_and_raises_the_store_s_failure() -> None:
    store, local = BrokenStore(), MemoryLimiter()
    limiter = FallbackLimiter(store, local, timeout=1, fallbacks=counter())
    await limiter.take("k", LIMIT, 100.0)
    assert len(local) == 1
    with pytest.raises(LimiterUnavailableError):
        await limiter.expire(200.0)
    assert len(local) == 0
