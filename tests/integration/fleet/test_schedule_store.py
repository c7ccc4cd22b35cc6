"""The PostgreSQL schedule store holds to the store's contract."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from mowdeck.fleet.schedules.postgres import PostgresScheduleStore
from tests.support.schedules import add_site, seed_mowers
from tests.unit.fleet.schedules.store_contract import ACCOUNT, BEFORE, StoreContract


class PostgresWorld:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self.store = PostgresScheduleStore(pool)

    async def add_site(self, timezone: str) -> uuid.UUID:
        return await add_site(self.pool, ACCOUNT, timezone, BEFORE)

    async def add_mower(self, site: uuid.UUID | None) -> uuid.UUID:
        (mower,) = await seed_mowers(self.pool, ACCOUNT, [site] if site else [], 1, BEFORE)
        return mower


class TestPostgresStore(StoreContract):
    @pytest.fixture
    async def world(self, pool: asyncpg.Pool) -> PostgresWorld:
        await pool.execute("TRUNCATE fleet_mowers CASCADE")
        await pool.execute("TRUNCATE fleet_schedule_outbox")
        return PostgresWorld(pool)
