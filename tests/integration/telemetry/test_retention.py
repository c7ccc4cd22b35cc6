"""Retention against PostgreSQL: batches, cutoffs per table, and one replica per round."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import structlog
from prometheus_client import CollectorRegistry

from mowdeck.telemetry.metrics import TelemetryMetrics
from mowdeck.telemetry.postgres import PostgresTelemetryStore
from mowdeck.telemetry.retention import Retention
from mowdeck.telemetry.settings import TelemetrySettings
from tests.integration.telemetry.conftest import ServiceFactory
from tests.support.eventually import eventually
from tests.unit.telemetry.samples import ACCOUNT, MOWER

NOW = datetime(2026, 6, 1, tzinfo=UTC)
LOCK = 0x74656C65


async def _fill(pool: asyncpg.Pool, table: str, days_ago: float, rows: int) -> None:
    start = NOW - timedelta(days=days_ago)
    if table == "command_timeline":
        await pool.execute(
            "INSERT INTO command_timeline (command_id, status, mower_id, account_id, at)"
            " SELECT gen_random_uuid(), 'accepted', $1, $2, $3::timestamptz + i * interval '1 ms'"
            " FROM generate_series(1, $4) i",
            MOWER,
            ACCOUNT,
            start,
            rows,
        )
        return
    history = table == "mower_history"
    extra = "activity, battery, charging, rtk_fix" if history else "lat, lon, rtk_fix"
    values = "'idle', 50, false, 'fixed'" if history else "1, 1, 'fixed'"
    await pool.execute(
        f"INSERT INTO {table} (mower_id, observed_at, account_id, {extra})"  # noqa: S608
        f" SELECT $1, $3::timestamptz + i * interval '1 ms', $2, {values}"
        " FROM generate_series(1, $4) i",
        MOWER,
        ACCOUNT,
        start,
        rows,
    )


def _replica(pool: asyncpg.Pool, dsn: str, **settings: int) -> Retention:
    return Retention(
        PostgresTelemetryStore(pool, dsn),
        TelemetrySettings(**settings),  # type: ignore[arg-type]
        TelemetryMetrics(CollectorRegistry()),
        clock=lambda: NOW,
    )


async def test_each_table_keeps_its_configured_days(pool: asyncpg.Pool, migrated: str) -> None:
    for table, old, young in (
        ("mower_history", 31, 29),
        ("mower_positions", 91, 89),
        ("command_timeline", 31, 29),
    ):
        await _fill(pool, table, old, 7)
        await _fill(pool, table, young, 3)
    deleted = await _replica(pool, migrated).run_once()
    assert deleted == {
        "mower_history": 7,
        "mower_positions": 7,
        "command_timeline": 7,
        "mower_directory": 0,
    }
    shorter = _replica(pool, migrated, telemetry_retention_positions_days=10)
    assert await shorter.run_once() == {
        "mower_history": 0,
        "mower_positions": 3,
        "command_timeline": 0,
        "mower_directory": 0,
    }


async def test_tombstones_go_after_the_longest_retention_or_their_own(
    pool: asyncpg.Pool, migrated: str
) -> None:
    store = PostgresTelemetryStore(pool, migrated)
    ages = {uuid.UUID(int=700 + days): days for days in (5, 60, 89, 91, 400)}
    for mower_id, days in ages.items():
        await store.register_mower(mower_id, ACCOUNT, NOW - timedelta(days=days + 1))
        await store.remove_mower(mower_id, NOW - timedelta(days=days))
    live = uuid.UUID(int=799)
    await store.register_mower(live, ACCOUNT, NOW - timedelta(days=1000))

    async def directory() -> set[uuid.UUID]:
        return {r["mower_id"] for r in await pool.fetch("SELECT mower_id FROM mower_directory")}

    # By default a tombstone lives as long as the longest-kept table (positions, 90 days).
    deleted = await _replica(pool, migrated).run_once()
    assert deleted is not None
    assert deleted["mower_directory"] == 2
    assert await directory() == {uuid.UUID(int=705), uuid.UUID(int=760), uuid.UUID(int=789), live}
    own = _replica(pool, migrated, telemetry_retention_tombstone_days=30)
    assert (await own.run_once() or {}).get("mower_directory") == 2
    assert await directory() == {uuid.UUID(int=705), live}
    assert await store.directory_account(live) == ACCOUNT


async def test_a_replica_skips_while_another_holds_the_lock(
    pool: asyncpg.Pool, migrated: str
) -> None:
    await _fill(pool, "mower_history", 40, 5)
    holder: asyncpg.Connection = await asyncpg.connect(migrated)
    try:
        assert await holder.fetchval("SELECT pg_try_advisory_lock($1)", LOCK)
        assert await _replica(pool, migrated).run_once() is None
        assert await pool.fetchval("SELECT count(*) FROM mower_history") == 5
        await holder.execute("SELECT pg_advisory_unlock($1)", LOCK)
    finally:
        await holder.close()
    assert await _replica(pool, migrated).run_once() == {
        "mower_history": 5,
        "mower_positions": 0,
        "command_timeline": 0,
        "mower_directory": 0,
    }


async def test_two_replicas_racing_only_one_deletes(pool: asyncpg.Pool, migrated: str) -> None:
    await _fill(pool, "mower_history", 40, 12_000)  # three batches of 5,000
    # Every old row locked by a transaction of the test: whichever replica takes the
    # advisory lock first waits in its first delete, holding the lock, until the other
    # replica's attempt is over. Without this the first could finish before the second
    # even tried, and the second would run a round of its own that finds nothing.
    blocker: asyncpg.Connection = await asyncpg.connect(migrated)
    try:
        rows = blocker.transaction()
        await rows.start()
        await blocker.execute("SELECT 1 FROM mower_history FOR UPDATE")
        replicas = [
            asyncio.create_task(_replica(pool, migrated).run_once()),
            asyncio.create_task(_replica(pool, migrated).run_once()),
        ]
        with structlog.testing.capture_logs() as logs:
            done, _ = await asyncio.wait(replicas, timeout=30, return_when=asyncio.FIRST_COMPLETED)
        assert [task.result() for task in done] == [None]  # skipped: the other holds the lock
        assert [e["event"] for e in logs] == ["retention skipped: another replica holds the lock"]
        await rows.rollback()
        results = await asyncio.gather(*replicas)
    finally:
        await blocker.close()
    deleted = [r for r in results if r is not None]
    assert len(deleted) == 1
    assert results.count(None) == 1
    assert deleted[0]["mower_history"] == 12_000
    assert await pool.fetchval("SELECT count(*) FROM mower_history") == 0


async def test_the_service_runs_retention_on_its_interval(
    make_service: ServiceFactory, pool: asyncpg.Pool
) -> None:
    await _fill(pool, "mower_history", 400, 3)  # older than 30 days from today
    service = await make_service(telemetry_retention_interval_seconds=0.1)
    service.parts.retention.start()

    async def deleted() -> float | None:
        return service.metrics_registry.get_sample_value(
            "mowdeck_telemetry_retention_deleted_rows_total", {"table": "mower_history"}
        )

    assert await eventually(deleted) == 3
    assert await pool.fetchval("SELECT count(*) FROM mower_history") == 0
