"""Concurrent takes of a key in one write: as one after another, and never left waiting."""

from __future__ import annotations

import asyncio

import pytest
from structlog.contextvars import get_contextvars

from mowdeck.kit.logging import bound
from mowdeck.kit.ratelimit import (
    BatchingLimiter,
    Limit,
    LimiterUnavailableError,
    MemoryLimiter,
    TokenStore,
    Verdict,
)

LIMIT = Limit(rate=2, burst=5)


class Store(TokenStore):
    """Buckets in memory whose writes wait for the test to let them through, and count."""

    def __init__(self) -> None:
        self.buckets = MemoryLimiter()
        self.writes: list[tuple[str, int]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail = False

    async def take(self, key: str, limit: Limit, now: float) -> Verdict:
        raise AssertionError("a batching limiter writes with take_many")

    async def take_many(self, key: str, limit: Limit, now: float, count: int) -> tuple[float, int]:
        self.writes.append((key, count))
        await self.gate.wait()
        if self.fail:
            raise LimiterUnavailableError("down")
        return await self.buckets.take_many(key, limit, now, count)

    async def expire(self, now: float) -> int:
        return await self.buckets.expire(now)


async def test_takes_that_arrive_during_a_write_share_the_next_one() -> None:
    store = Store()
    limiter = BatchingLimiter(store)
    store.gate.clear()
    first = asyncio.create_task(limiter.take("a", LIMIT, 100.0))
    await asyncio.sleep(0)  # the first write is in flight, held at the gate
    rest = [asyncio.create_task(limiter.take("a", LIMIT, 100.0)) for _ in range(7)]
    other = asyncio.create_task(limiter.take("b", LIMIT, 100.0))
    await asyncio.sleep(0)
    store.gate.set()
    answers = [await first] + [await t for t in rest]
    assert [a.allowed for a in answers] == [True] * 5 + [False] * 3
    assert {a.retry_after for a in answers[5:]} == {0.5}
    assert (await other).allowed
    assert sorted(store.writes) == [("a", 1), ("a", 7), ("b", 1)]


async def test_a_failed_write_fails_every_take_in_it() -> None:
    store = Store()
    store.fail = True
    limiter = BatchingLimiter(store)
    takes = [asyncio.create_task(limiter.take("a", LIMIT, 100.0)) for _ in range(3)]
    for take in takes:
        with pytest.raises(LimiterUnavailableError):
            await take
    store.fail = False
    assert (await limiter.take("a", LIMIT, 100.0)).allowed  # a new write after the failure


async def test_a_take_given_up_before_its_write_takes_no_token() -> None:
    store = Store()
    limiter = BatchingLimiter(store)
    store.gate.clear()
    first = asyncio.create_task(limiter.take("a", LIMIT, 100.0))
    await asyncio.sleep(0)
    given_up = [asyncio.create_task(limiter.take("a", LIMIT, 100.0)) for _ in range(4)]
    await asyncio.sleep(0)
    for take in given_up:
        take.cancel()
    kept = asyncio.create_task(limiter.take("a", LIMIT, 100.0))
    await asyncio.sleep(0)
    store.gate.set()
    assert (await first).allowed
    assert (await kept).allowed
    assert store.writes == [("a", 1), ("a", 1)]
    answers = [(await limiter.take("a", LIMIT, 100.0)).allowed for _ in range(4)]
    assert answers == [True, True, True, False]


async def test_closing_fails_the_takes_waiting_for_a_write() -> None:
    store = Store()
    limiter = BatchingLimiter(store)
    store.gate.clear()
    takes = [asyncio.create_task(limiter.take("a", LIMIT, 100.0)) for _ in range(3)]
    await asyncio.sleep(0)
    await limiter.close()
    for take in takes:
        with pytest.raises(LimiterUnavailableError, match="closed"):
            await take


async def test_a_batch_without_an_answer_in_time_fails_as_unavailable_and_the_key_goes_on() -> None:
    store = Store()
    limiter = BatchingLimiter(store, timeout=0.05)
    store.gate.clear()
    first = asyncio.create_task(limiter.take("a", LIMIT, 100.0))
    await asyncio.sleep(0)  # its write is in flight, held at the gate
    behind = [asyncio.create_task(limiter.take("a", LIMIT, 100.0)) for _ in range(3)]
    for take in (first, *behind):
        with pytest.raises(LimiterUnavailableError, match=r"no answer within 0\.05 s"):
            await take
    # The write still hangs: a later take has a deadline of its own, not the spent one.
    later = asyncio.create_task(limiter.take("a", LIMIT, 100.0))
    with pytest.raises(LimiterUnavailableError, match="no answer"):
        await asyncio.wait_for(later, 1)
    store.gate.set()
    assert (await limiter.take("a", LIMIT, 100.0)).allowed
    # Takes given up before their write took no tokens: only the first write's one did.
    assert store.writes == [("a", 1), ("a", 1)]


class Noting(Store):
    """Notes what is bound in the writer when it writes."""

    def __init__(self) -> None:
        super().__init__()
        self.bound: list[dict[str, object]] = []

    async def take_many(self, key: str, limit: Limit, now: float, count: int) -> tuple[float, int]:
        self.bound.append(get_contextvars())
        return await super().take_many(key, limit, now, count)


async def test_the_key_s_writer_logs_as_the_service_not_as_the_request_that_started_it() -> None:
    store = Noting()
    limiter = BatchingLimiter(store)
    with bound(service="fleet", mower_id="m1", account_id="a1"):
        assert (await limiter.take("account:a1", LIMIT, 100.0)).allowed
    assert store.bound == [{"service": "fleet"}]
