"""Realtime's PostgreSQL ``LatestStates`` on Telemetry's table, held to the adapters' contract.

The rows are written by Telemetry's own store: the columns Realtime reads
(docs/telemetry.md, "Read by other services") are held to what Telemetry writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest
import structlog

from contracts.v1 import MowerState
from mowdeck.kit.migrate import discover, migrate, sql_root
from mowdeck.kit.pg import session_settings
from mowdeck.realtime.errors import StatesUnavailableError
from mowdeck.realtime.stale import LatestStates, PostgresLatestStates
from mowdeck.telemetry.postgres import PostgresTelemetryStore
from tests.support.postgres import create_database, drop_database
from tests.unit.realtime.latest_states_contract import CONTRACT, OTHER_MOWER, Case
from tests.unit.telemetry.samples import ACCOUNT, MOWER, state
from tests.unit.telemetry.store_contract import write


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    """A pool as Realtime opens it, on Telemetry's emptied tables."""
    await migrate(database_url, discover(sql_root(), ["telemetry"]))
    p = await asyncpg.create_pool(
        database_url, min_size=1, max_size=2, server_settings=session_settings(10_000)
    )
    await p.execute("TRUNCATE mower_latest")
    yield p
    await p.close()


@pytest.mark.parametrize("case", CONTRACT, ids=[case.__name__ for case in CONTRACT])
async def test_postgres_adapter(case: Case, pool: asyncpg.Pool, database_url: str) -> None:
    async def seeded(states: list[MowerState]) -> LatestStates:
        await write(PostgresTelemetryStore(pool, database_url), latest=states)
        return PostgresLatestStates(pool)

    await case(seeded)


async def test_a_row_that_is_no_state_is_skipped_and_logged(
    pool: asyncpg.Pool, database_url: str
) -> None:
    await write(
        PostgresTelemetryStore(pool, database_url),
        latest=[state(0, battery=7), state(0, mower_id=OTHER_MOWER, battery=8)],
    )
    await pool.execute("UPDATE mower_latest SET activity = 'flying' WHERE mower_id = $1", MOWER)
    with structlog.testing.capture_logs() as logs:
        found = await PostgresLatestStates(pool).latest([MOWER, OTHER_MOWER], account_id=ACCOUNT)
    assert [(s.mower_id, s.battery) for s in found] == [(OTHER_MOWER, 8)]
    assert [(e["event"], e["mower_id"]) for e in logs] == [("telemetry row skipped", str(MOWER))]


async def test_a_closed_pool_is_states_unavailable(pool: asyncpg.Pool) -> None:
    states = PostgresLatestStates(pool)
    await pool.close()
    with pytest.raises(StatesUnavailableError, match="cannot be read"):
        await states.latest([MOWER], account_id=ACCOUNT)


async def test_a_database_without_telemetrys_table_is_states_unavailable() -> None:
    url = await asyncio.to_thread(create_database)
    try:
        async with asyncpg.create_pool(url, min_size=1, max_size=1) as bare:
            with pytest.raises(StatesUnavailableError, match="mower_latest"):
                await PostgresLatestStates(bare).latest([MOWER], account_id=ACCOUNT)
    finally:
        await asyncio.to_thread(drop_database, url)
