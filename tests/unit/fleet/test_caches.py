"""Caches: expiry, single flight, invalidation."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import msgspec

from contracts.v1 import Connection, MowerRegistration
from mowdeck.authz import Tuple
from mowdeck.fleet.caches import CachedAuthorizer, RecordCache, SingleFlight
from mowdeck.fleet.memory import InMemoryMowerRepository
from mowdeck.fleet.ports import MowerRecord
from mowdeck.fleet.rules import registry_event

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


class CountingRepository(InMemoryMowerRepository):
    """Counts the mowers asked for per query."""

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[int] = []

    async def get(self, mower_id: uuid.UUID) -> MowerRecord | None:
        self.queries.append(1)
        return await super().get(mower_id)

    async def get_many(self, mower_ids: Sequence[uuid.UUID]) -> list[MowerRecord]:
        self.queries.append(len(mower_ids))
        return await super().get_many(mower_ids)


async def _records(names: str) -> tuple[CountingRepository, list[uuid.UUID]]:
    repo = CountingRepository()
    ids = []
    for name in names:
        reg = _reg(name)
        await repo.add(MowerRecord(reg, NOW, NOW), registry_event("mower.registered", reg, now=NOW))
        ids.append(reg.mower_id)
    return repo, ids


async def test_a_miss_also_reloads_the_records_in_use_that_expire_soon() -> None:
    repo, (a, b, c, d) = await _records("abcd")
    clock = Clock()
    cache = RecordCache(repo, ttl=1.0, clock=clock)
    for mower in (a, b, c):
        await cache.get(mower)
    assert repo.queries == [1, 1, 1]
    clock.t = 0.2
    await cache.get(a)
    await cache.get(b)  # c is not asked for again
    clock.t = 0.7
    assert (await cache.get(d)) is not None  # a miss: a and b expire within 0.5 s
    assert repo.queries[-1] == 3
    repo.mowers[a] = MowerRecord(
        msgspec.structs.replace(repo.mowers[a].registration, name="renamed"), NOW, NOW
    )
    clock.t = 1.5  # a and b were reloaded at 0.7: still fresh, no query
    cached_a, cached_b = await cache.get(a), await cache.get(b)
    assert (cached_a, cached_b) == (
        MowerRecord(msgspec.structs.replace(repo.mowers[a].registration, name="a"), NOW, NOW),
        repo.mowers[b],
    )
    assert len(repo.queries) == 4
    clock.t = 1.71  # every value is at most ttl old: a is read again
    found = await cache.get(a)
    assert found is not None
    assert found.registration.name == "renamed"


async def test_records_reloaded_across_a_forget_are_not_kept() -> None:
    repo, (a, b) = await _records("ab")
    clock = Clock()
    cache = RecordCache(repo, ttl=1.0, clock=clock)
    await cache.get(a)
    clock.t = 0.1
    await cache.get(a)  # in use
    clock.t = 0.6
    load = asyncio.create_task(cache.get(b))  # reloads a as well
    await asyncio.sleep(0)
    cache.forget(a)
    await load
    before = len(repo.queries)
    await cache.get(a)
    assert len(repo.queries) == before + 1  # a was not kept from the bulk reload


def _reg(name: str) -> MowerRegistration:
    return MowerRegistration(
        mower_id=uuid.uuid4(),
        account_id=uuid.uuid4(),
        name=name,
        connection=Connection(kind="simulator"),
    )
