"""The PostgreSQL adapters against the repository contract."""

from __future__ import annotations

import asyncpg
import pytest

from mowdeck.fleet.postgres import PostgresMowerRepository, PostgresPruning
from mowdeck.fleet.postgres_commands import PostgresAuditTrail, PostgresCommandLog
from tests.unit.fleet.repository_contract import *  # noqa: F403 - the shared contract tests


@pytest.fixture
async def repo(pool: asyncpg.Pool) -> PostgresMowerRepository:
    await pool.execute("DELETE FROM fleet_outbox")
    return PostgresMowerRepository(pool)


@pytest.fixture
def command_log(pool: asyncpg.Pool) -> PostgresCommandLog:
    return PostgresCommandLog(pool)


@pytest.fixture
def audit_trail(pool: asyncpg.Pool) -> PostgresAuditTrail:
    return PostgresAuditTrail(pool)


@pytest.fixture
def pruning(pool: asyncpg.Pool) -> PostgresPruning:
    return PostgresPruning(pool)
