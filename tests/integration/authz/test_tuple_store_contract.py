"""One contract for both tuple stores (PostgreSQL for real, and in memory)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from mowdeck.authz import (
    InMemoryTupleStore,
    LocalAuthorizer,
    PostgresTupleStore,
    Tuple,
    TupleStore,
    grant_tuples,
    mower_object,
    user_ref,
)
from mowdeck.authz.fgatest import run_test_file
from mowdeck.kit.migrate import discover, migrate, sql_root

T1 = Tuple("user:ann", "viewer", "group:g1")
T2 = Tuple("group:g1#viewer", "viewer", "group:g2")
T3 = Tuple("user:*", "viewer", "group:g3")
T4 = Tuple("account:a", "account", "mower:m1")
ALL = [T1, T2, T3, T4]


@pytest.fixture(scope="module")
def migrated(database_url: str) -> str:
    """The module's database with the authz migrations applied."""
    asyncio.run(migrate(database_url, discover(sql_root(), ["authz"])))
    return database_url


@pytest.fixture
async def pool(migrated: str) -> AsyncIterator[asyncpg.Pool]:
    """A pool on an emptied tuple table."""
    p = await asyncpg.create_pool(migrated, min_size=1, max_size=4)
    await p.execute("TRUNCATE authz_tuples")
    yield p
    await p.close()


@pytest.fixture(params=["memory", "postgres"])
async def store(request: pytest.FixtureRequest, migrated: str) -> AsyncIterator[TupleStore]:
    """Each store in turn (the database is made first, outside the event loop)."""
    if request.param == "memory":
        yield InMemoryTupleStore()
        return
    p = await asyncpg.create_pool(migrated, min_size=1, max_size=4)
    await p.execute("TRUNCATE authz_tuples")
    yield PostgresTupleStore(p)
    await p.close()


async def test_write_read_and_filters(store: TupleStore) -> None:
    await store.write(ALL)
    assert await store.read() == sorted(ALL, key=lambda t: (t.object, t.relation, t.user))
    assert await store.read(object="group:") == [T1, T2, T3]
    assert await store.read(object="group:g2") == [T2]
    assert await store.read(user="user:ann") == [T1]
    assert await store.read(relation="account") == [T4]
    assert await store.read(relation="viewer", object="mower:") == []


async def test_writes_and_deletes_are_idempotent(store: TupleStore) -> None:
    await store.write([T1, T1])
    await store.write([T1], [T4])
    await store.write([T2], [T1])
    assert await store.read() == [T2]


async def test_lookups(store: TupleStore) -> None:
    await store.write(ALL)
    assert await store.contains_any("group:g1", "viewer", ["user:bob", "user:ann"])
    assert not await store.contains_any("group:g1", "viewer", ["user:bob"])
    assert not await store.contains_any("group:g1", "viewer", [])
    assert await store.usersets("group:g2", "viewer") == ["group:g1#viewer"]
    assert await store.usersets("group:g1", "viewer") == []
    assert await store.objects_with("group", "viewer", ["user:ann", "user:*"]) == {
        "group:g1",
        "group:g3",
    }
    assert await store.objects_with("mower", "viewer", ["user:ann"]) == set()


async def test_object_tuples(store: TupleStore) -> None:
    bob = Tuple("user:bob", "viewer", "group:g1")
    await store.write([*ALL, bob])
    found = await store.object_tuples(["group:g1", "group:g2", "mower:m1"], ["user:ann"], [])
    assert sorted(found) == sorted([T1, T2])
    found = await store.object_tuples(["group:g3", "mower:m1"], ["user:*"], ["account"])
    assert sorted(found) == sorted([T3, T4])
    assert await store.object_tuples(["group:g1"], [], []) == []
    assert await store.object_tuples([], ["user:ann"], ["account"]) == []


async def test_delete_object(store: TupleStore) -> None:
    await store.write([*ALL, Tuple("user:bob", "viewer", "group:g1")])
    assert await store.delete_object("group:g1") == 2
    assert await store.read(object="group:g1") == []
    assert await store.delete_object("group:g1") == 0
    assert len(await store.read()) == 3


async def test_conformance_file_on_postgres(pool: asyncpg.Pool) -> None:
    async def fresh() -> TupleStore:
        await pool.execute("TRUNCATE authz_tuples")
        return PostgresTupleStore(pool)

    outcome = await run_test_file(store_factory=fresh)
    assert outcome.failures == []
    assert outcome.checks >= 100


async def test_list_objects_on_thousands_of_mowers(pool: asyncpg.Pool) -> None:
    authorizer = LocalAuthorizer(PostgresTupleStore(pool))
    account = uuid.uuid4()
    mowers = [uuid.uuid4() for _ in range(3000)]
    tuples = [Tuple(f"account:{account}", "account", mower_object(m)) for m in mowers]
    tuples += [Tuple("group:north", "group", mower_object(m)) for m in mowers[:1000]]
    await authorizer.write(tuples)
    await authorizer.write(grant_tuples(account, "gina", "viewer", "north"))
    await authorizer.write(grant_tuples(account, "vera", "viewer"))
    loop = asyncio.get_running_loop()
    started = loop.time()
    gina = await authorizer.list_objects(user_ref("gina"), "can_view", "mower")
    vera = await authorizer.list_objects(user_ref("vera"), "can_view", "mower")
    elapsed = loop.time() - started
    assert gina == {mower_object(m) for m in mowers[:1000]}
    assert len(vera) == 3000
    assert elapsed < 5, f"list_objects took {elapsed:.2f}s"
