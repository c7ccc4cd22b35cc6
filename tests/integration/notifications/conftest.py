"""Fixtures: a migrated database per module, a pool and the stores on emptied tables per test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from mowdeck.kit.migrate import discover, migrate, sql_root
from mowdeck.notifications.infra import Stores

TABLES = (
    "notification_preferences, notification_watches, notification_pending, notification_inbox,"
    " notification_targets, notification_deliveries, notification_alarms"
)


@pytest.fixture
async def migrated(database_url: str) -> str:
    """The module's database with the notifications migrations applied."""
    await migrate(database_url, discover(sql_root(), ["notifications"]))
    return database_url


@pytest.fixture
async def pool(migrated: str) -> AsyncIterator[asyncpg.Pool]:
    """A pool on emptied notifications tables."""
    p = await asyncpg.create_pool(migrated, min_size=1, max_size=4)
    await p.execute(f"TRUNCATE {TABLES}")
    async with p.acquire() as conn, conn.transaction():
        # The alarm trail refuses every delete but its retention's (0006_alarm_audit.sql).
        await conn.execute("SET LOCAL mowdeck.audit_retention = 'on'")
        await conn.execute("DELETE FROM notification_alarm_audit")
    yield p
    await p.close()


@pytest.fixture
def stores(pool: asyncpg.Pool) -> Stores:
    """The PostgreSQL stores."""
    return Stores.postgres(pool)
