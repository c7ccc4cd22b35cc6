"""The slowest queries the APIs allow, timed: what ``MOWDECK_DATABASE_STATEMENT_TIMEOUT_MS``
must stay far above.

A fresh database holds a month of a busy mower (a history row and a track point every
10 s through eight hours of mowing a day, the rest of the day every 5 min), quieter mowers
around it, an account of 10,000 mowers (latest states and registrations) and 100,000
audited commands. Each query runs through the store that serves it, at the largest size
its API accepts (31 days, 5,000 bins or rows, one page of the audit), ``--repeat`` times
after one warm-up; the figures are milliseconds.

Run: python -m tests.bench.slow_queries [--smoke] [--repeat N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from mowdeck.fleet.ports import AuditQuery
from mowdeck.fleet.postgres import PostgresMowerRepository
from mowdeck.fleet.postgres_commands import PostgresAuditTrail
from mowdeck.kit.migrate import discover, migrate, sql_root
from mowdeck.telemetry.postgres import PostgresTelemetryStore
from tests.support.postgres import create_database, drop_database

ACCOUNT = uuid.UUID("00000000-0000-4000-8000-0000000000a1")
BUSY = uuid.UUID("00000000-0000-4000-8000-0000000000b1")
END = datetime(2026, 12, 1, tzinfo=UTC)
MONTH = timedelta(days=31)

# A month of one busy mower: every 10 s from 08:00 to 16:00, every 5 min otherwise.
_BUSY_ROWS = """
INSERT INTO {table}
SELECT $1, t, $2, {columns}
FROM generate_series($3::timestamptz, $4::timestamptz, interval '10 seconds') AS t
WHERE extract(hour FROM t) BETWEEN 8 AND 15 OR extract(epoch FROM t)::bigint % 300 = 0
"""
_HISTORY = (
    "CASE WHEN extract(hour FROM t) BETWEEN 8 AND 15 THEN 'mowing' ELSE 'charging' END,"
    " (extract(epoch FROM t)::bigint / 60 % 100)::smallint, extract(hour FROM t) < 8,"
    " 'fixed', 'base', 'wifi', 40, 0.5, NULL"
)
_POSITIONS = (
    "52.0 + (extract(epoch FROM t)::bigint % 1000) * 1e-6,"
    " 13.0 + (extract(epoch FROM t)::bigint % 777) * 1e-6, 90.0, 'fixed'"
)
# Quieter mowers: a row every 5 min, a month each.
_QUIET_HISTORY = f"""
INSERT INTO mower_history
SELECT m, t, $1, {_HISTORY}
FROM unnest($2::uuid[]) AS m,
     generate_series($3::timestamptz, $4::timestamptz, interval '5 minutes') AS t
"""  # noqa: S608 - the columns are this module's own text
_LATEST = """
INSERT INTO mower_latest (mower_id, account_id, observed_at, activity, battery, charging,
    rtk_fix, state_fp, lat, lon)
SELECT m, $1, $2, 'mowing', 80, false, 'fixed', 0, 52.0, 13.0 FROM unnest($3::uuid[]) AS m
"""
_MOWERS = """
INSERT INTO fleet_mowers (mower_id, account_id, name, connection_kind, connection_options,
    created_at, updated_at)
SELECT m, $1, 'mower ' || m::text, 'simulator', '{}'::jsonb, $2, $2 FROM unnest($3::uuid[]) AS m
"""
_AUDIT = """
INSERT INTO fleet_audit_commands (command_id, account_id, mower_id, kind, command, issued_by,
    issued_at, expires_at)
SELECT gen_random_uuid(), $1, ($2::uuid[])[1 + i % array_length($2::uuid[], 1)],
    (ARRAY['start_mow', 'pause_mow', 'return_to_dock', 'emergency_stop'])[1 + i % 4],
    '{"kind": "start_mow"}'::jsonb, 'user:bench',
    $3::timestamptz - i * interval '20 seconds', $3::timestamptz - i * interval '20 seconds'
    + interval '30 seconds'
FROM generate_series(1, $4) AS i
"""


async def _fill(
    pool: asyncpg.Pool, *, days: int, quiet: int, mowers: int, audited: int
) -> list[uuid.UUID]:
    start = END - timedelta(days=days)
    for table, columns in (("mower_history", _HISTORY), ("mower_positions", _POSITIONS)):
        sql = _BUSY_ROWS.format(table=table, columns=columns)
        await pool.execute(sql, BUSY, ACCOUNT, start, END)
    quiet_ids = [uuid.uuid4() for _ in range(quiet)]
    await pool.execute(_QUIET_HISTORY, ACCOUNT, quiet_ids, start, END)
    fleet = [BUSY, *(uuid.uuid4() for _ in range(mowers - 1))]
    await pool.execute(_LATEST, ACCOUNT, END, fleet)
    await pool.execute(_MOWERS, ACCOUNT, END, fleet)
    # The audit trail is append-only for everyone but its retention round.
    async with pool.acquire() as conn:
        await conn.execute(_AUDIT, ACCOUNT, fleet[:500], END, audited)
    await pool.execute("ANALYZE")
    return fleet


Query = Callable[[], Awaitable[Any]]


async def _time(query: Query, repeat: int) -> list[float]:
    await query()  # warm-up: plans and caches, as a running service has them
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        await query()
        times.append((time.perf_counter() - started) * 1000)
    return times


def _queries(pool: asyncpg.Pool, dsn: str, fleet: list[uuid.UUID]) -> dict[str, Query]:
    telemetry = PostgresTelemetryStore(pool, dsn)
    registry = PostgresMowerRepository(pool)
    audit = PostgresAuditTrail(pool)
    start = END - MONTH
    page = AuditQuery(
        account_id=ACCOUNT,
        mower_id=None,
        since=None,
        until=None,
        kind=None,
        limit=1000,
        before=None,
    )
    stops = AuditQuery(
        account_id=ACCOUNT,
        mower_id=None,
        since=start,
        until=END,
        kind="emergency_stop",
        limit=1000,
        before=None,
    )
    return {
        # 31 days in 4,960 bins of 9 min: the most bins MOWDECK_TELEMETRY_QUERY_MAX_ROWS allows.
        "history_bins_9m": lambda: telemetry.history_bins(
            ACCOUNT, BUSY, start, END, timedelta(minutes=9)
        ),
        "history_bins_1h": lambda: telemetry.history_bins(
            ACCOUNT, BUSY, start, END, timedelta(hours=1)
        ),
        "history_raw": lambda: telemetry.history(ACCOUNT, BUSY, start, END, 5001),
        "track": lambda: telemetry.track(ACCOUNT, BUSY, start, END, 5001),
        "states_10k": lambda: telemetry.latest_of_account(ACCOUNT, None),
        # Fleet's answer to fleet.mowers.list (every mower) and a page of GET /v1/mowers.
        "registrations_10k": registry.all_registrations,
        "mowers_get_1k": lambda: registry.get_many(fleet[:1000]),
        "audit_page": lambda: audit.page(page),
        "audit_stops": lambda: audit.page(stops),
    }


async def run(dsn: str, *, smoke: bool, repeat: int) -> dict[str, float]:
    """Fill the fresh database ``dsn``, time every query; the slowest run of each, in ms."""
    await migrate(dsn, discover(sql_root(), ["telemetry", "fleet", "authz"]))
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    try:
        sizes = (
            {"days": 2, "quiet": 5, "mowers": 200, "audited": 2_000}
            if smoke
            else {"days": 31, "quiet": 200, "mowers": 10_000, "audited": 100_000}
        )
        filled = time.perf_counter()
        fleet = await _fill(pool, **sizes)
        print(f"filled in {time.perf_counter() - filled:.1f} s: {sizes}")
        worst: dict[str, float] = {}
        for name, query in _queries(pool, dsn, fleet).items():
            times = await _time(query, repeat)
            worst[name] = max(times)
            print(
                f"{name:16} p50 {statistics.median(times):7.1f} ms"
                f"  max {max(times):7.1f} ms  ({len(times)} runs)"
            )
        return worst
    finally:
        await pool.close()


def main() -> None:
    """Print every query's figures and a RESULT line."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="a few seconds, for CI")
    parser.add_argument("--repeat", type=int, default=20, help="runs per query after warm-up")
    args = parser.parse_args()
    dsn = create_database("mowdeck_bench")
    try:
        worst = asyncio.run(run(dsn, smoke=args.smoke, repeat=3 if args.smoke else args.repeat))
    finally:
        drop_database(dsn)
    slowest = max(worst, key=worst.__getitem__)
    figures = " ".join(f"{k}_max_ms={v:.1f}" for k, v in worst.items())
    print(f"RESULT slowest={slowest} slowest_max_ms={worst[slowest]:.1f} {figures}")


if __name__ == "__main__":
    main()
