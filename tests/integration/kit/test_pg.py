"""``kit.pg.keep_session``: a pool's connections released without asyncpg's reset query."""

from __future__ import annotations

import asyncpg
import pytest

from mowdeck.kit.pg import QUERY_CANCELED, keep_session, session_settings


async def test_a_released_connection_keeps_its_session_and_loses_an_open_transaction(
    database_url: str,
) -> None:
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=1, reset=keep_session)
    try:
        async with pool.acquire() as conn:
            backend = await conn.fetchval("SELECT pg_backend_pid()")
            # Session state that asyncpg's reset query (RESET ALL) would undo: none of the
            # pools that use keep_session make any; this shows that no reset query ran.
            await conn.execute("SET application_name = 'kept'")
            await conn.execute("CREATE TEMP TABLE left_open (n int)")
            await conn.execute("BEGIN")  # not through asyncpg's transaction manager
            await conn.execute("INSERT INTO left_open VALUES (1)")
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT pg_backend_pid()") == backend  # the same one
            assert await conn.fetchval("SHOW application_name") == "kept"
            # The transaction left open was rolled back on release all the same.
            assert not conn.is_in_transaction()
            assert await conn.fetchval("SELECT count(*) FROM left_open") == 0
    finally:
        await pool.close()


async def test_a_pool_with_the_session_settings_cancels_a_statement_past_its_timeout(
    database_url: str,
) -> None:
    pool = await asyncpg.create_pool(
        database_url, min_size=1, max_size=1, server_settings=session_settings(200)
    )
    try:
        assert await pool.fetchval("SHOW timezone") == "UTC"
        await pool.execute("SELECT pg_sleep(0.05)")  # well within
        with pytest.raises(asyncpg.QueryCanceledError) as cancelled:
            await pool.execute("SELECT pg_sleep(5)")
        assert cancelled.value.sqlstate == QUERY_CANCELED
        assert await pool.fetchval("SELECT 1") == 1  # the connection is usable again
    finally:
        await pool.close()
