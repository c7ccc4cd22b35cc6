"""The PostgreSQL store against the store contract, and its indexes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from mowdeck.telemetry import sql
from mowdeck.telemetry.postgres import PostgresTelemetryStore
from tests.unit.telemetry.samples import MOWER
from tests.unit.telemetry.store_contract import StoreContract


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
