"""The PostgreSQL store against the store contract, and its indexes."""

from __future__ import annotations

import asyncpg
import pytest

from mowdeck.telemetry.postgres import PostgresTelemetryStore
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
    for table in ("mower_history", "mower_positions"):
        assert (table, "btree (mower_id, observed_at)") in defs
        assert (table, "btree (mower_id, observed_at DESC)") in defs
        assert (table, "btree (account_id, observed_at DESC)") in defs
        assert (table, "brin (observed_at)") in defs
    assert ("command_timeline", "brin (at)") in defs
    assert ("command_timeline", "btree (command_id, status)") in defs
    assert ("mower_latest", "btree (mower_id)") in defs
    assert ("mower_directory", "btree (mower_id)") in defs
