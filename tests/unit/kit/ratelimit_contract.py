"""One contract for every ``Limiter``; adapters' test modules import it.

A test module provides a ``limiter`` fixture and star-imports the tests. Every answer
must be the one ``kit.ratelimit.take`` gives for the same takes, whatever the store.
"""

from __future__ import annotations

import asyncio
import random
import uuid

import pytest

from mowdeck.kit.ratelimit import Bucket, Limit, Limiter, take

__all__ = [
    "test_a_burst_passes_then_the_next_take_is_refused_until_a_token_is_back",
    "test_concurrent_takes_of_one_key_pass_exactly_the_burst",
    "test_every_answer_is_the_arithmetic_s_over_a_random_history",
    "test_expire_forgets_full_buckets_only",
    "test_keys_have_buckets_of_their_own",
    "test_the_limit_is_the_one_given_with_each_take",
]

T0 = 1_800_000_000.0  # seconds since the epoch, as the services' clocks give them


def _key() -> str:
    return f"test:{uuid.uuid4()}"


async def test_a_burst_passes_then_the_next_take_is_refused_until_a_token_is_back(
    limiter: Limiter,
) -> None:
    key, limit = _key(), Limit(rate=4, burst=3)
    answers = [await limiter.take(key, limit, T0) for _ in range(4)]
    assert [a.allowed for a in answers] == [True, True, True, False]
    assert answers[-1].retry_after == pytest.approx(0.25)
    refused = await limiter.take(key, limit, T0 + 0.2)
    assert not refused.allowed
    assert refused.retry_after == pytest.approx(0.05)
    assert (await limiter.take(key, limit, T0 + 0.25)).allowed


async def test_keys_have_buckets_of_their_own(limiter: Limiter) -> None:
    first, second, limit = _key(), _key(), Limit(rate=1, burst=1)
    assert (await limiter.take(first, limit, T0)).allowed
    assert not (await limiter.take(first, limit, T0)).allowed
    assert (await limiter.take(second, limit, T0)).allowed


async def test_the_limit_is_the_one_given_with_each_take(limiter: Limiter) -> None:
    # A limit changed between takes (a new setting) holds from the next take on: a lower
    # burst caps what the bucket held, a higher rate refills faster.
    key = _key()
    for _ in range(5):
        assert (await limiter.take(key, Limit(rate=1, burst=10), T0)).allowed
    lower = Limit(rate=1, burst=2)
    answers = [(await limiter.take(key, lower, T0)).allowed for _ in range(3)]
    assert answers == [True, True, False]
    assert not (await limiter.take(key, lower, T0 + 0.5)).allowed
    assert (await limiter.take(key, Limit(rate=2, burst=2), T0 + 0.75)).allowed  # 0.75 at 1/s


async def test_every_answer_is_the_arithmetic_s_over_a_random_history(limiter: Limiter) -> None:
    # Fractional tokens, clocks going back, idle gaps of every size and two limits.
    rng = random.Random(20261205)
    keys = [_key() for _ in range(3)]
    limits = [Limit(rate=0.7, burst=2.5), Limit(rate=5, burst=1)]
    expected: dict[str, Bucket] = {}
    now = T0
    for step in range(300):
        now += rng.choice([0.0, 0.01, 0.3, 1.1, -0.5, -3.0, 40.0, 1e9])
        key = rng.choice(keys)
        limit = limits[keys.index(key) % 2]
        bucket, want = take(expected.get(key), limit, now)
        expected[key] = bucket
        got = await limiter.take(key, limit, now)
        assert got.allowed == want.allowed, f"step {step}"
        assert got.retry_after == pytest.approx(want.retry_after), f"step {step}"


async def test_concurrent_takes_of_one_key_pass_exactly_the_burst(limiter: Limiter) -> None:
    key, limit = _key(), Limit(rate=0.001, burst=25)
    answers = await asyncio.gather(*(limiter.take(key, limit, T0) for _ in range(60)))
    assert sum(a.allowed for a in answers) == 25


async def test_expire_forgets_full_buckets_only(limiter: Limiter) -> None:
    quick, slow = _key(), _key()
    quick_limit, slow_limit = Limit(rate=10, burst=1), Limit(rate=0.01, burst=1)
    assert (await limiter.take(quick, quick_limit, T0)).allowed  # full again at T0 + 0.1
    assert (await limiter.take(slow, slow_limit, T0)).allowed  # full again at T0 + 100
    # Other tests' buckets may go too (they are full by then); these two are what counts.
    assert await limiter.expire(T0 + 0.1) >= 1
    # The slow bucket is still empty: it was kept.
    assert not (await limiter.take(slow, slow_limit, T0 + 0.2)).allowed
    # The quick one, forgotten, is full: taking twice at the same instant passes once.
    assert (await limiter.take(quick, quick_limit, T0 + 0.2)).allowed
    assert not (await limiter.take(quick, quick_limit, T0 + 0.2)).allowed
