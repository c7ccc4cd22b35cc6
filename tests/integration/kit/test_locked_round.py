"""The locked round on real PostgreSQL: one replica at a time, and a lock that never stays."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from mowdeck.kit.locked_round import BatchedDelete, LockedRound, connection_like
from mowdeck.kit.pg import session_settings
from tests.support.eventually import eventually

KEY = 0x74657374  # "test"


class Connections:
    """Opens the round's connections and remembers them."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.opened: list[asyncpg.Connection] = []

    async def __call__(self) -> asyncpg.Connection:
        conn: asyncpg.Connection = await asyncpg.connect(self.dsn)
        self.opened.append(conn)
        return conn


@pytest.fixture
async def other(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection of someone else, to look at the lock from outside."""
    conn = await asyncpg.connect(database_url)
    yield conn
    await conn.close()


async def lock_is_free(conn: asyncpg.Connection) -> bool:
    """Whether the round's lock can be taken (and then given back) from ``conn``."""
    if not await conn.fetchval("SELECT pg_try_advisory_lock($1)", KEY):
        return False
    await conn.execute("SELECT pg_advisory_unlock($1)", KEY)
    return True


async def test_of_two_rounds_at_once_one_runs_and_the_other_skips(
    database_url: str, other: asyncpg.Connection
) -> None:
    connections = Connections(database_url)
    inside, leave = asyncio.Event(), asyncio.Event()

    async def slow(conn: asyncpg.Connection) -> str:
        inside.set()
        await leave.wait()
        return "done"

    async def quick(conn: asyncpg.Connection) -> str:
        return "ran"

    first = asyncio.create_task(LockedRound(KEY, connections).run(slow))
    await asyncio.wait_for(inside.wait(), 5)
    assert await LockedRound(KEY, connections).run(quick) is None
    assert not await lock_is_free(other)
    leave.set()
    assert await first == "done"
    assert await lock_is_free(other)
    assert all(conn.is_closed() for conn in connections.opened)
    assert await LockedRound(KEY, connections).run(quick) == "ran"


async def test_a_failed_unlock_closes_the_connection_and_the_next_round_takes_the_lock(
    database_url: str, other: asyncpg.Connection
) -> None:
    connections = Connections(database_url)

    async def leaves_an_aborted_transaction(conn: asyncpg.Connection) -> str:
        # Every later statement on this session fails, the unlock among them.
        await conn.execute("BEGIN")
        with pytest.raises(asyncpg.DivisionByZeroError):
            await conn.execute("SELECT 1 / 0")
        return "committed part"

    round_ = LockedRound(KEY, connections)
    assert await round_.run(leaves_an_aborted_transaction) == "committed part"
    [conn] = connections.opened
    assert conn.is_closed()
    # The server gives a session's advisory locks back when its backend sees the socket
    # close, a moment after the client closed it.
    await eventually(lambda: lock_is_free(other), timeout=5, what="the lock given back")

    async def quick(conn: asyncpg.Connection) -> str:
        return "ran"

    assert await round_.run(quick) == "ran"


async def test_batched_deletes_repeat_until_a_batch_is_short(
    database_url: str, other: asyncpg.Connection
) -> None:
    await other.execute(
        "CREATE TABLE IF NOT EXISTS round_rows (id int PRIMARY KEY, at int NOT NULL);"
        " TRUNCATE round_rows;"
        " INSERT INTO round_rows SELECT i, i FROM generate_series(1, 25) i"
    )
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=1)
    try:
        round_ = LockedRound(KEY, lambda: connection_like(pool))
        deleted = await round_.delete([(BatchedDelete("round_rows", "at", key="id"), 21)], 4)
    finally:
        await pool.close()
    assert deleted == {"round_rows": 20}
    assert await other.fetchval("SELECT count(*) FROM round_rows") == 5


async def test_a_round_runs_under_its_own_statement_timeout(database_url: str) -> None:
    # The session's own timeout is a service pool's, far too short for housekeeping.
    async def connect() -> asyncpg.Connection:
        conn: asyncpg.Connection = await asyncpg.connect(
            database_url, server_settings=session_settings(100)
        )
        return conn

    async def slow(conn: asyncpg.Connection) -> str:
        await conn.execute("SELECT pg_sleep(0.3)")
        shown: str = await conn.fetchval("SHOW statement_timeout")
        return shown

    assert await LockedRound(KEY, connect, statement_timeout_ms=5000).run(slow) == "5s"
    with pytest.raises(asyncpg.QueryCanceledError):
        await LockedRound(KEY, connect).run(slow)
