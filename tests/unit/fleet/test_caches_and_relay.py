"""Caches (expiry, single flight, invalidation) and the relay over the in-memory outbox."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

from contracts.v1 import Connection, MowerRegistration
from mowdeck.authz import Tuple
from mowdeck.fleet.caches import CachedAuthorizer, SingleFlight
from mowdeck.fleet.memory import InMemoryMowerRepository
from mowdeck.fleet.outbox import OutboxRelay
from mowdeck.fleet.ports import MowerRecord, OutboxEvent
from mowdeck.fleet.registry import outbox_event

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class CountingAuthorizer:
    """Answers from a set of allowed triples and counts the checks it was asked."""

    def __init__(self) -> None:
        self.allowed: set[tuple[str, str, str]] = set()
        self.checks = 0
        self.invalidated = 0

    async def check(self, user: str, relation: str, object: str) -> bool:
        self.checks += 1
        await asyncio.sleep(0.01)
        return (user, relation, object) in self.allowed

    async def write(self, writes: Sequence[Tuple], deletes: Sequence[Tuple] = ()) -> None:
        pass

    def invalidate(self) -> None:
        self.invalidated += 1


async def test_decisions_are_reused_until_they_expire_and_concurrent_misses_share_one() -> None:
    inner, clock = CountingAuthorizer(), Clock()
    cached = CachedAuthorizer(inner, ttl=1.0, clock=clock)  # type: ignore[arg-type]
    inner.allowed.add(("user:a", "can_view", "mower:1"))
    answers = await asyncio.gather(
        *(cached.check("user:a", "can_view", "mower:1") for _ in range(50))
    )
    assert all(answers)
    assert inner.checks == 1
    clock.t = 0.9
    inner.allowed.clear()
    assert await cached.check("user:a", "can_view", "mower:1") is True
    clock.t = 1.1
    assert await cached.check("user:a", "can_view", "mower:1") is False
    assert inner.checks == 2


async def test_a_write_forgets_every_decision() -> None:
    inner = CountingAuthorizer()
    cached = CachedAuthorizer(inner, ttl=60.0)  # type: ignore[arg-type]
    assert await cached.check("user:a", "can_view", "mower:1") is False
    inner.allowed.add(("user:a", "can_view", "mower:1"))
    await cached.write([Tuple("account:x", "account", "mower:1")])
    assert await cached.check("user:a", "can_view", "mower:1") is True
    assert inner.invalidated == 1


async def test_a_value_loaded_across_an_invalidation_is_not_kept() -> None:
    flight: SingleFlight[str, int] = SingleFlight(60.0)
    release = asyncio.Event()
    calls = 0

    async def load() -> int:
        nonlocal calls
        calls += 1
        await release.wait()
        return calls

    task = asyncio.create_task(flight.get("k", load))
    await asyncio.sleep(0)
    flight.forget()
    release.set()
    assert await task == 1
    assert await flight.get("k", load) == 2


def _reg(name: str) -> MowerRegistration:
    return MowerRegistration(
        mower_id=uuid.uuid4(),
        account_id=uuid.uuid4(),
        name=name,
        connection=Connection(kind="simulator"),
    )


async def test_the_relay_publishes_in_order_and_retries_what_failed() -> None:
    repo = InMemoryMowerRepository()
    for name in ("a", "b", "c"):
        reg = _reg(name)
        await repo.add(MowerRecord(reg, NOW, NOW), outbox_event("mower.registered", reg, now=NOW))
    sent: list[OutboxEvent] = []
    fail = True

    async def publish(events: list[OutboxEvent]) -> None:
        if fail:
            raise ConnectionError("bus down")
        sent.extend(events)

    relay = OutboxRelay(repo, publish, batch=2, poll_seconds=0.01)
    relay.start()
    await asyncio.sleep(0.05)
    assert (await repo.outbox_stats()).pending == 3
    fail = False
    for _ in range(100):
        if (await repo.outbox_stats()).pending == 0:
            break
        await asyncio.sleep(0.02)
    await relay.stop()
    assert [e.event_id for e in sent] == [e.event_id for e, _ in repo.outbox]
