"""The in-memory limiter, alone and batched: the contract, and a dict that does not grow
without end."""

from __future__ import annotations

import pytest

from mowdeck.kit.ratelimit import BatchingLimiter, Limit, Limiter, MemoryLimiter
from tests.unit.kit.ratelimit_contract import *  # noqa: F403 - the shared contract tests


@pytest.fixture(params=["alone", "batched"])
def limiter(request: pytest.FixtureRequest) -> Limiter:
    if request.param == "batched":
        return BatchingLimiter(MemoryLimiter())
    return MemoryLimiter()


async def test_buckets_full_again_are_swept_as_new_keys_keep_coming() -> None:
    limiter = MemoryLimiter()
    limit = Limit(rate=10, burst=5)  # a bucket is full 0.1 s after one take
    for n in range(100_000):
        # A thousand new keys every tenth of a second, each seen once.
        assert (await limiter.take(f"k{n}", limit, n / 10_000)).allowed
    assert len(limiter) < 10_000
    assert (await limiter.take("k99999", limit, 10.0)).allowed  # the newest are kept
    assert len(limiter) >= 1_000
