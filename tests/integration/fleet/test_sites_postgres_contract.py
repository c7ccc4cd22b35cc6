"""The PostgreSQL site store against the site repository contract."""

from __future__ import annotations

import asyncpg
import pytest

from mowdeck.fleet.postgres import PostgresMowerRepository
from mowdeck.fleet.sites.postgres import PostgresSiteRepository
from tests.unit.fleet.sites.site_repository_contract import *  # noqa: F403 - the contract


@pytest.fixture
async def repo(pool: asyncpg.Pool) -> PostgresMowerRepository:
    await pool.execute("DELETE FROM fleet_outbox")
    return PostgresMowerRepository(pool)


@pytest.fixture
def sites(pool: asyncpg.Pool) -> PostgresSiteRepository:
    return PostgresSiteRepository(pool)
