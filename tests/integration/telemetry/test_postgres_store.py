"""The PostgreSQL store against the store contract, its indexes, errors and time zones."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import msgspec
import pytest

from mowdeck.telemetry import sql
from mowdeck.telemetry.bins import downsample, parse_step
from mowdeck.telemetry.errors import StoreError, StoreRejectedError
from mowdeck.telemetry.model import TimelineRow
from mowdeck.telemetry.postgres import PostgresTelemetryStore, create_pool
from tests.unit.telemetry.samples import ACCOUNT, MOWER, at, state
from tests.unit.telemetry.store_contract import OTHER_MOWER, StoreContract, write


@pytest.fixture
def store(pg_store: PostgresTelemetryStore) -> PostgresTelemetryStore:
    return pg_store


class TestPostgresStore(StoreContract):
    pass


async def test_tables_have_the_keys_and_indexes_of_the_adr(pool: asyncpg.Pool) -> None:
    rows = await pool.fetch(
        "SELECT tablename, indexdef FROM pg_indexes WHERE schemaname = 'public'"
        " AND tablename LIKE ANY (ARRAY['mower_%', 'command_timeline'])"
    )
    defs = {(r["tablename"], r["indexdef"].split(" USING ")[1]) for r in rows}
    # The primary key is also the ADR's (mower_id, observed_at desc) index: a second
    # btree on the same columns would only double the write cost. History's carries what
    # the chart aggregates, so that scan is index-only.
    assert (
        "mower_history",
        "btree (mower_id, observed_at) INCLUDE (account_id, battery, charging)",
    ) in defs
    assert ("mower_positions", "btree (mower_id, observed_at)") in defs
    for table in ("mower_history", "mower_positions"):
        assert (table, "btree (mower_id, observed_at DESC)") not in defs
        assert (table, "btree (account_id, observed_at DESC)") in defs
        assert (table, "brin (observed_at)") in defs
    assert ("command_timeline", "brin (at)") in defs
    assert ("command_timeline", "btree (command_id, status)") in defs
    assert ("mower_latest", "btree (mower_id)") in defs
    assert ("mower_directory", "btree (mower_id)") in defs


async def test_the_primary_key_serves_the_newest_first_order(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn, conn.transaction():
        # The tables are nearly empty here, where any plan is cheap: rule the others out.
        for plan_kind in ("seqscan", "bitmapscan", "sort"):
            await conn.execute(f"SET LOCAL enable_{plan_kind} = off")
        for table in ("mower_history", "mower_positions"):
            rows = await conn.fetch(
                f"EXPLAIN SELECT * FROM {table} WHERE mower_id = $1"  # noqa: S608
                " ORDER BY observed_at DESC LIMIT 10",
                MOWER,
            )
            plan = "\n".join(row[0] for row in rows)
            assert f"Index Scan Backward using {table}_pkey" in plan, plan


async def test_history_bins_walk_the_index_without_grouping_rows(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn, conn.transaction():
        for plan_kind in ("seqscan", "bitmapscan"):
            await conn.execute(f"SET LOCAL enable_{plan_kind} = off")
        rows = await conn.fetch(
            "EXPLAIN " + sql.HISTORY_BINS,
            MOWER,
            MOWER,
            datetime(2026, 1, 1, tzinfo=UTC),
            datetime(2026, 2, 1, tzinfo=UTC),
            timedelta(hours=1),
        )
    plan = "\n".join(row[0] for row in rows)
    assert "Index Only Scan using mower_history_pkey" in plan, plan
    assert "HashAggregate" not in plan, plan
    assert "GroupAggregate" not in plan, plan


async def test_latest_rows_leave_room_for_in_place_updates(pool: asyncpg.Pool) -> None:
    options = await pool.fetchval("SELECT reloptions FROM pg_class WHERE relname = 'mower_latest'")
    assert "fillfactor=50" in options


# -- data PostgreSQL refuses -----------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "fields"),
    [
        ("latest", {"error_code": "E\x00"}),
        ("latest", {"raw": {"fw": "\x00"}}),
        ("history", {"connection": "wifi\x00"}),
        ("history", {"rtk_source": "\x00"}),
    ],
    ids=["latest-text", "latest-jsonb", "history-connection", "history-rtk-source"],
)
async def test_refused_data_is_a_store_rejected_error(
    pg_store: PostgresTelemetryStore, pool: asyncpg.Pool, table: str, fields: dict[str, Any]
) -> None:
    clean, refused = state(0), state(0, mower_id=OTHER_MOWER, **fields)
    with pytest.raises(StoreRejectedError) as caught:
        await write(pg_store, **{table: [clean, refused]})
    assert isinstance(caught.value.__cause__, asyncpg.DataError)
    # The transaction is rolled back as a whole.
    assert await pool.fetchval("SELECT count(*) FROM mower_latest") == 0
    assert await pool.fetchval("SELECT count(*) FROM mower_history") == 0


async def test_a_timeline_reason_postgresql_refuses(pg_store: PostgresTelemetryStore) -> None:
    row = TimelineRow(
        command_id=MOWER, status="failed", mower_id=MOWER, account_id=ACCOUNT, at=at(0)
    )
    with pytest.raises(StoreRejectedError):
        await pg_store.add_timeline(msgspec.structs.replace(row, reason="motor\x00stalled"))
    assert await pg_store.add_timeline(row)


async def test_the_seed_raises_store_errors(migrated: str) -> None:
    closed = await asyncpg.create_pool(migrated, min_size=1, max_size=1)
    await closed.close()
    store = PostgresTelemetryStore(closed, migrated)
    with pytest.raises(StoreError) as caught:
        await store.seed_directory([(MOWER, ACCOUNT)])
    assert not isinstance(caught.value, StoreRejectedError)
    assert isinstance(caught.value.__cause__, asyncpg.InterfaceError)


# -- time zones --------------------------------------------------------------------------

# Central European Summer Time starts on 2026-03-29: that day has 23 hours in Berlin.
SPRING = datetime(2026, 3, 26, tzinfo=UTC)


@pytest.fixture
async def berlin_pool(pool: asyncpg.Pool, migrated: str) -> AsyncIterator[asyncpg.Pool]:
    """A pool on the emptied tables whose sessions run in Europe/Berlin."""
    p = await asyncpg.create_pool(
        migrated, min_size=1, max_size=2, server_settings={"timezone": "Europe/Berlin"}
    )
    yield p
    await p.close()


async def test_daily_bins_ignore_the_session_time_zone(berlin_pool: asyncpg.Pool) -> None:
    assert await berlin_pool.fetchval("SHOW TimeZone") == "Europe/Berlin"
    store = PostgresTelemetryStore(berlin_pool, "unused")
    states = [
        msgspec.structs.replace(
            state(0, battery=i, lat=52.5 + i / 1000), observed_at=SPRING + timedelta(hours=5 * i)
        )
        for i in range(40)  # every 5 hours for 8 days, across the change
    ]
    await write(store, history=states, positions=states)
    start, end, step = SPRING, SPRING + timedelta(days=8), parse_step("1d")
    bins = await store.history_bins(ACCOUNT, MOWER, start, end, step)
    rows = await store.history(ACCOUNT, MOWER, start, end, 1000)
    track = await store.track(ACCOUNT, MOWER, start, end, 1000)
    assert bins == downsample(rows, track, step)
    assert [b.bin for b in bins] == [SPRING + timedelta(days=d) for d in range(8)]


async def test_the_service_pool_runs_in_utc(pool: asyncpg.Pool, migrated: str) -> None:
    name = await pool.fetchval("SELECT current_database()")
    await pool.execute(f"ALTER DATABASE \"{name}\" SET timezone = 'Europe/Berlin'")
    try:
        service_pool = await create_pool(migrated, max_size=1)
        try:
            assert await service_pool.fetchval("SHOW TimeZone") == "UTC"
        finally:
            await service_pool.close()
        # The database's default really is another zone.
        other = await asyncpg.connect(migrated)
        try:
            assert await other.fetchval("SHOW TimeZone") == "Europe/Berlin"
        finally:
            await other.close()
    finally:
        await pool.execute(f'ALTER DATABASE "{name}" RESET timezone')


@pytest.mark.parametrize("query", ["LATEST_ACCOUNT_AFTER", "LATEST_SOME_AFTER"])
async def test_a_page_of_states_is_read_through_an_index_never_by_offset(
    pool: asyncpg.Pool, query: str
) -> None:
    text = getattr(sql, query)
    assert "OFFSET" not in text.upper()
    params: list[Any] = [uuid.uuid4(), 501, uuid.uuid4()]
    if query == "LATEST_SOME_AFTER":
        params.insert(2, [uuid.uuid4()])
    async with pool.acquire() as conn, conn.transaction():
        # Rows of a test database are few: ask what the plan is where a scan would cost.
        await conn.execute("SET LOCAL enable_seqscan = off")
        plan = await conn.fetchval(f"EXPLAIN (FORMAT JSON) {text}", *params)
    assert "Index" in plan and "Seq Scan" not in plan, plan
