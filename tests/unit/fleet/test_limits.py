"""Fleet's command limits: the user's bucket first, the account's next, a stop never."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import pytest
from prometheus_client import CollectorRegistry, Counter
from structlog.testing import capture_logs

from contracts.v1 import EmergencyStop, PauseMow
from mowdeck.authn import Principal
from mowdeck.fleet.limits import CommandLimits
from mowdeck.kit.http import Problem
from mowdeck.kit.ratelimit import (
    FallbackLimiter,
    Limit,
    Limiter,
    LimiterUnavailableError,
    MemoryLimiter,
    RateLimit,
    RateLimitMetrics,
    Verdict,
)

ACCOUNT = uuid.uuid4()
ALICE, BOB = Principal("alice", ACCOUNT), Principal("bob", ACCOUNT)


class CountingStore(Limiter):
    """A shared store in memory that counts its takes, or never answers when hung."""

    def __init__(self, *, hung: bool = False) -> None:
        self.takes = 0
        self.hung = hung
        self.buckets = MemoryLimiter()

    async def take(self, key: str, limit: Limit, now: float) -> Verdict:
        self.takes += 1
        if self.hung:
            await asyncio.Event().wait()
        return await self.buckets.take(key, limit, now)

    async def expire(self, now: float) -> int:
        return await self.buckets.expire(now)


def limits(
    store: Limiter, *, user: Limit, account: Limit
) -> tuple[CommandLimits, CollectorRegistry]:
    registry = CollectorRegistry()
    metrics = RateLimitMetrics(registry, service="fleet")
    local = MemoryLimiter()
    shared = FallbackLimiter(
        store, local, timeout=30, fallbacks=Counter("f", "f", registry=registry)
    )
    clock = lambda: 1000.0  # noqa: E731 - a stopped clock: nothing refills
    return (
        CommandLimits(
            RateLimit("commands_per_user", user, local, metrics, what="u", clock=clock),
            RateLimit("commands_per_account", account, shared, metrics, what="a", clock=clock),
            shared,
        ),
        registry,
    )


def refused(registry: CollectorRegistry, limit: str) -> float | None:
    return registry.get_sample_value("mowdeck_fleet_rate_limited_total", {"limit": limit})


async def test_one_user_s_flood_is_refused_by_the_user_s_bucket_and_spares_the_account() -> None:
    store = CountingStore()
    fleet, registry = limits(store, user=Limit(1, 3), account=Limit(1, 5))
    passed = 0
    for _ in range(10):
        try:
            await fleet.admit(ALICE, PauseMow())
            passed += 1
        except Problem as problem:
            assert problem.extra["limit"] == "commands_per_user"
    assert passed == 3
    assert store.takes == 3  # the refused seven never reached the shared store
    assert refused(registry, "commands_per_user") == 7
    for _ in range(2):  # the account still has room for another user
        await fleet.admit(BOB, PauseMow())
    with pytest.raises(Problem) as over:
        await fleet.admit(BOB, PauseMow())
    assert over.value.extra["limit"] == "commands_per_account"
    assert refused(registry, "commands_per_account") == 1


async def test_an_emergency_stop_passes_empty_buckets_and_a_hung_store() -> None:
    store = CountingStore(hung=True)
    fleet, registry = limits(store, user=Limit(1, 1), account=Limit(1, 1))
    ordinary = asyncio.create_task(fleet.admit(ALICE, PauseMow()))  # waits on the store
    await asyncio.sleep(0)
    async with asyncio.timeout(1):
        for _ in range(100):
            await fleet.admit(ALICE, EmergencyStop(reason="child on the lawn"))
    assert store.takes == 1  # the ordinary command's, still waiting
    assert not ordinary.done()
    ordinary.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await ordinary
    assert refused(registry, "commands_per_user") == 0


async def test_the_expiry_round_forgets_full_buckets_and_outlives_a_failing_store() -> None:
    store = CountingStore()
    fleet, _ = limits(store, user=Limit(1000, 3), account=Limit(1000, 3))
    await fleet.admit(ALICE, PauseMow())
    assert len(store.buckets) == 1
    assert await fleet.expire() == 2  # the user's bucket here, the account's in the store
    assert len(store.buckets) == 0

    class Down(CountingStore):
        async def expire(self, now: float) -> int:
            raise LimiterUnavailableError("connection refused")

    broken, _ = limits(Down(), user=Limit(1, 3), account=Limit(1, 3))
    with capture_logs() as logs:
        assert await broken.expire() == 0
    assert [e["event"] for e in logs] == ["idle rate limit buckets not deleted"]
