"""The PostgreSQL limiter on Fleet's migrated table, alone and batched, against the
limiter contract."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from mowdeck.kit.migrate import discover, migrate, sql_root
from mowdeck.kit.ratelimit import (
    BatchingLimiter,
    Limit,
    Limiter,
    LimiterUnavailableError,
    PostgresLimiter,
    take_many,
)
from tests.unit.kit.ratelimit_contract import *  # noqa: F403 - the shared contract tests
from tests.unit.kit.ratelimit_contract import T0

TABLE = "fleet_rate_limits"


@pytest.fixture(scope="module")
def migrated(database_url: str) -> str:
    """The module's database with Fleet's migrations (the limiter's table among them)."""
    asyncio.run(migrate(database_url, discover(sql_root(), ["fleet"])))
    return database_url


@pytest.fixture
async def pool(migrated: str) -> AsyncIterator[asyncpg.Pool]:
    p = await asyncpg.create_pool(migrated, min_size=1, max_size=8)
    yield p
    await p.close()


@pytest.fixture(params=["alone", "batched"])
def limiter(request: pytest.FixtureRequest, pool: asyncpg.Pool) -> Limiter:
    # As many connections as the pool: the contract's concurrent takes really race (alone,
    # one statement each; batched, one statement for those that arrived together).
    store = PostgresLimiter(pool, TABLE, connections=8)
    return BatchingLimiter(store) if request.param == "batched" else store


@pytest.mark.parametrize("count", [1, 2, 5, 30], ids=lambda n: f"{n} at once")
async def test_many_at_once_is_the_arithmetic_s(pool: asyncpg.Pool, count: int) -> None:
    store, limit = PostgresLimiter(pool, TABLE), Limit(rate=3, burst=7.5)
    key, bucket = f"many:{count}:{T0}", None
    for step, now in enumerate([T0, T0 + 0.4, T0 + 0.4, T0 + 2.9, T0 + 1.0, T0 + 500]):
        tokens, granted = await store.take_many(key, limit, now, count)
        bucket, want = take_many(bucket, limit, now, count)
        assert (tokens, granted) == (pytest.approx(bucket.tokens), want), f"step {step}"


async def test_the_table_is_unlogged(pool: asyncpg.Pool) -> None:
    persistence = await pool.fetchval(
        "SELECT relpersistence::text FROM pg_class WHERE relname = $1", TABLE
    )
    assert persistence == "u"


async def test_expired_rows_are_deleted_and_live_ones_kept(pool: asyncpg.Pool) -> None:
    limiter = PostgresLimiter(pool, TABLE)
    await pool.execute("DELETE FROM fleet_rate_limits")
    limit = Limit(rate=1, burst=2)
    for n in range(50):
        await limiter.take(f"idle:{n}", limit, T0)  # full again at T0 + 1
    await limiter.take("busy", limit, T0 + 5)
    await limiter.take("busy", limit, T0 + 5)  # full again at T0 + 7
    assert await limiter.expire(T0 + 6) == 50
    assert await pool.fetchval("SELECT array_agg(key) FROM fleet_rate_limits") == ["busy"]


async def test_a_store_that_fails_raises_limiter_unavailable(pool: asyncpg.Pool) -> None:
    limiter = PostgresLimiter(pool, "no_such_table")
    with pytest.raises(LimiterUnavailableError, match="no_such_table"):
        await limiter.take("k", Limit(1, 1), T0)
    with pytest.raises(LimiterUnavailableError):
        await limiter.expire(T0)


async def test_a_hung_table_holds_no_more_than_its_connections_of_the_pool(
    pool: asyncpg.Pool,
) -> None:
    limiter = PostgresLimiter(pool, TABLE, connections=2)
    async with pool.acquire() as blocker, blocker.transaction():
        await blocker.execute("LOCK TABLE fleet_rate_limits IN ACCESS EXCLUSIVE MODE")
        waiting = [asyncio.create_task(limiter.take(f"k{n}", Limit(1, 1), T0)) for n in range(10)]
        await asyncio.sleep(0.2)
        # Ten takes wait on the lock, yet the pool still serves other work at once.
        async with asyncio.timeout(2):
            assert await pool.fetchval("SELECT 1") == 1
        assert not any(t.done() for t in waiting)
    await asyncio.gather(*waiting)


def test_a_table_name_that_is_not_plain_is_refused(pool: asyncpg.Pool) -> None:
    with pytest.raises(ValueError, match="table"):
        PostgresLimiter(pool, "t; DROP TABLE x")
