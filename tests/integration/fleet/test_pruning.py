"""Pruning on real PostgreSQL: one replica at a time, the lock never leaks, Fleet runs it."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import aiohttp
import asyncpg

from mowdeck.authz import Authorizer
from mowdeck.fleet.ports import CommandRecord, PruneCutoffs
from mowdeck.fleet.postgres import _PRUNE_LOCK, PostgresPruning
from mowdeck.fleet.postgres_commands import PostgresCommandLog
from mowdeck.kit.bus import Bus
from tests.integration.fleet.conftest import start_fleet
from tests.support.eventually import eventually


async def old_command(pool: asyncpg.Pool, days: float) -> CommandRecord:
    """A command issued ``days`` ago, stored in the command log."""
    at = datetime.now(UTC) - timedelta(days=days)
    record = CommandRecord(uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), "pause_mow", "user:a", at, at)
    await PostgresCommandLog(pool).record([record], [])
    return record


async def stored(pool: asyncpg.Pool, record: CommandRecord) -> bool:
    """Whether the command log still has ``record``."""
    return (await PostgresCommandLog(pool).lookup(record.command_id))[0] is not None


def cutoffs() -> PruneCutoffs:
    """The default retention (1 day of published events, 7 days of commands) at now."""
    return PruneCutoffs.at(datetime.now(UTC), 1, 7)


async def test_only_one_replica_prunes_at_a_time(pool: asyncpg.Pool, fleet_db: str) -> None:
    old = await old_command(pool, days=8)
    other = await asyncpg.connect(fleet_db)  # another replica, in the middle of a round
    try:
        assert await other.fetchval("SELECT pg_try_advisory_lock($1)", _PRUNE_LOCK)
        assert await PostgresPruning(pool).prune(cutoffs(), 100) is None
        assert await stored(pool, old)
        await other.execute("SELECT pg_advisory_unlock($1)", _PRUNE_LOCK)
        deleted = await PostgresPruning(pool).prune(cutoffs(), 100)
        assert deleted is not None
        assert deleted["fleet_commands"] >= 1
        assert not await stored(pool, old)
        # The round let go of the lock: the pooled connection does not keep it.
        assert await other.fetchval("SELECT pg_try_advisory_lock($1)", _PRUNE_LOCK)
        await other.execute("SELECT pg_advisory_unlock($1)", _PRUNE_LOCK)
    finally:
        await other.close()


async def test_a_cancelled_round_keeps_its_batches_and_releases_the_lock(
    pool: asyncpg.Pool, fleet_db: str
) -> None:
    for _ in range(3):
        await old_command(pool, days=9)
    blocker = await asyncpg.connect(fleet_db)
    try:
        # A table lock blocks the round in its first commands delete; then it is cancelled.
        async with blocker.transaction():
            await blocker.execute("LOCK TABLE fleet_commands IN EXCLUSIVE MODE")
            task = asyncio.create_task(PostgresPruning(pool).prune(cutoffs(), 1))
            # No message path to put a sentinel on: the synchronisation point is the
            # server showing the round's statement waiting for the lock.
            # Asked on another connection: inside the blocker's transaction the statistics
            # views keep the snapshot of its first read.
            await eventually(
                lambda: pool.fetchval(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND wait_event_type = 'Lock'"
                )
            )
            assert not task.done()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        assert await blocker.fetchval("SELECT pg_try_advisory_lock($1)", _PRUNE_LOCK)
        await blocker.execute("SELECT pg_advisory_unlock($1)", _PRUNE_LOCK)
    finally:
        await blocker.close()
    deleted = await PostgresPruning(pool).prune(cutoffs(), 1)
    assert deleted is not None
    assert deleted["fleet_commands"] >= 3


async def test_fleet_prunes_on_its_interval_with_its_retention_settings(
    bus: Bus, pool: asyncpg.Pool, authorizer: Authorizer
) -> None:
    eight_days, six_days = await old_command(pool, days=8), await old_command(pool, days=6)
    published, owed = uuid.uuid4(), uuid.uuid4()
    await pool.execute(
        "INSERT INTO fleet_outbox (event_id, subject, body, created_at, published_at)"
        " VALUES ($1, 'event.mower.updated', '{}', now() - interval '3 days',"
        " now() - interval '2 days'), ($2, 'event.mower.updated', '{}',"
        " now() - interval '3 days', NULL)",
        published,
        owed,
    )
    service = await start_fleet(bus, pool, authorizer, fleet_prune_interval_seconds=0.1)
    try:
        for _ in range(100):
            if not await stored(pool, eight_days):
                break
            await asyncio.sleep(0.05)
        assert not await stored(pool, eight_days)
        assert await stored(pool, six_days)
        left = {
            r["event_id"]
            for r in await pool.fetch(
                "SELECT event_id FROM fleet_outbox WHERE event_id = ANY($1::uuid[])",
                [published, owed],
            )
        }
        assert left == {owed}
        # The round counts its rows once it is over, a moment after its deletes committed.
        line = 'mowdeck_fleet_pruned_rows_total{table="fleet_commands"}'

        async def counted() -> bool:
            async with aiohttp.ClientSession() as http, http.get(service.url + "/metrics") as r:
                return line in await r.text()

        await eventually(counted, what="the round's rows counted")
    finally:
        await service.stop()
        await pool.execute("DELETE FROM fleet_outbox WHERE event_id = $1", owed)
