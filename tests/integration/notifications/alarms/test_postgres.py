"""The PostgreSQL alarm store against the alarm contract, and its trail's guard."""

from __future__ import annotations

import asyncpg
import pytest

from mowdeck.notifications.infra import Stores
from tests.unit.notifications.alarms.alarm_contract import AlarmContract, change, decide


class TestPostgresAlarms(AlarmContract):
    pass


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE notification_alarm_audit SET by_user = 'mallory'",
        "DELETE FROM notification_alarm_audit",
        "TRUNCATE notification_alarm_audit",
    ],
)
async def test_the_trail_refuses_changes_but_its_retention_s(
    stores: Stores, pool: asyncpg.Pool, statement: str
) -> None:
    await decide(stores, [change("raised")])
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
        await pool.execute(statement)
    assert await pool.fetchval("SELECT count(*) FROM notification_alarm_audit") == 1
