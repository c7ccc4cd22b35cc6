"""The scheduler at a peak minute: every mower's slot starts at 08:00.

100,000 mowers with schedules over 1,000 sites (central European time zones) on a fresh
database and its own nats-server; two Fleet scheduler replicas, each in a process of its
own with its own pool and bus connection, against the same PostgreSQL. Their clock is the
real one shifted so that 08:00 local comes a moment after they start: the claims, the
command log, the audit trail and the publishes are all real.

This process counts every ``start_mow`` the bus carries (a core subscription sees repeats
JetStream deduplicates) and when it arrived: lateness is arrival minus the slot's start.
Double starts are counted from the audit trail (start_mow commands per mower beyond one)
and from the bus (messages per mower beyond one). CPU per slot is both replicas' CPU time
over the slots started.

Run: python -m tests.bench.scheduler [--smoke] [--mowers N] [--sites N]
[--claim skip_locked|advisory] [--batch N] [--interval S] [--lead S]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from mowdeck.commands.streams import apply_all
from mowdeck.fleet.issuing import CommandPublisher
from mowdeck.fleet.schedules.codec import tasks_text
from mowdeck.fleet.schedules.plan import first_due
from mowdeck.fleet.schedules.postgres import PostgresScheduleStore
from mowdeck.fleet.schedules.scheduler import Scheduler, SchedulerSettings
from mowdeck.fleet.schedules.slots import Task
from mowdeck.kit.bus import Bus
from mowdeck.kit.migrate import discover, migrate, sql_root
from tests.support.natsserver import NatsServer
from tests.support.postgres import create_database, drop_database

ZONES = ("Europe/Berlin", "Europe/Paris", "Europe/Vienna", "Europe/Amsterdam", "Europe/Zurich")
DAILY_8 = [Task(datetime.strptime("08:00", "%H:%M").time(), 60, frozenset(range(7)), "front")]  # noqa: DTZ007
# 08:00 in central European summer time on a weekday, as the replicas' clock sees it.
SLOT = datetime(2026, 7, 1, 6, 0, tzinfo=UTC)
HEAD_START_S = 2.0  # the replicas start this long before 08:00 (and before the lead)


async def _seed(db: str, mowers: int, sites: int) -> None:
    await migrate(db, discover(sql_root(), ["fleet", "authz"]))
    account, before = uuid.uuid4(), SLOT - timedelta(hours=1)
    site_ids = [uuid.uuid4() for _ in range(sites)]
    mower_ids = [uuid.uuid4() for _ in range(mowers)]
    due = first_due(DAILY_8, __import__("zoneinfo").ZoneInfo(ZONES[0]), before)
    assert due is not None
    text = tasks_text(DAILY_8)
    conn = await asyncpg.connect(db)
    try:
        await conn.copy_records_to_table(
            "fleet_sites",
            records=[
                (s, account, f"site {i}", ZONES[i % len(ZONES)], 52.0, 13.0, before, before)
                for i, s in enumerate(site_ids)
            ],
            columns=[
                "site_id",
                "account_id",
                "name",
                "timezone",
                "lat",
                "lon",
                "created_at",
                "updated_at",
            ],
        )
        await conn.copy_records_to_table(
            "fleet_mowers",
            records=[
                (m, account, f"mower {i}", "simulator", before, before, site_ids[i % sites])
                for i, m in enumerate(mower_ids)
            ],
            columns=[
                "mower_id",
                "account_id",
                "name",
                "connection_kind",
                "created_at",
                "updated_at",
                "site_id",
            ],
        )
        await conn.copy_records_to_table(
            "fleet_schedules",
            records=[
                (
                    m,
                    account,
                    True,
                    text,
                    due.at,
                    "start",
                    due.slot.start,
                    due.slot.end,
                    0,
                    "front",
                    before,
                )
                for m in mower_ids
            ],
            columns=[
                "mower_id",
                "account_id",
                "enabled",
                "tasks",
                "due_at",
                "due_kind",
                "slot_start",
                "slot_end",
                "slot_task",
                "slot_area",
                "updated_at",
            ],
        )
        await conn.execute("ANALYZE")
    finally:
        await conn.close()


async def _replica(args: argparse.Namespace) -> None:
    """One Fleet replica's scheduler until nothing is due for a while; prints its stats."""
    bus = await Bus.connect(args.nats, name=f"bench-scheduler-{args.replica}")
    pool = await asyncpg.create_pool(args.db, min_size=2, max_size=10)  # the service default
    print("ready", flush=True)
    args.slot_wall = float(
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    )
    offset = SLOT - datetime.fromtimestamp(args.slot_wall, UTC)

    def clock() -> datetime:
        return datetime.now(UTC) + offset

    settings = SchedulerSettings(args.interval, args.batch, 30.0, 10.0, args.lead)
    publisher = CommandPublisher(bus, clock=clock)
    scheduler = Scheduler(
        PostgresScheduleStore(pool, mode=args.claim),
        publisher,
        settings,
        __import__("prometheus_client").CollectorRegistry(),
        clock=clock,
    )
    cpu, issued, idle = time.process_time(), 0, 0
    deadline = args.slot_wall + args.window
    while time.time() < deadline:
        done = await scheduler.run_once()  # the service's own loop, counted
        issued += done
        idle = idle + 1 if done == 0 and time.time() > args.slot_wall + 1 else 0
        if idle >= 3:
            break
        await asyncio.sleep(await scheduler.pause())
    await scheduler.drain()
    used = time.process_time() - cpu
    await publisher.stop()
    await pool.close()
    await bus.drain()
    print(json.dumps({"replica": args.replica, "issued": issued, "cpu_s": used}))


async def _watch(args: argparse.Namespace, nats_url: str, db: str) -> dict[str, Any]:
    bus = await Bus.connect(nats_url, name="bench-scheduler-watch")
    await apply_all(bus)
    arrivals: list[tuple[float, bytes]] = []

    async def arrived(msg: Any) -> None:
        arrivals.append((time.time(), msg.data))

    sub = await bus.nc.subscribe("command.mower.>", cb=arrived)
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.bench.scheduler",
            "--replica",
            str(i),
            "--db",
            db,
            "--nats",
            nats_url,
            "--claim",
            args.claim,
            "--batch",
            str(args.batch),
            "--interval",
            str(args.interval),
            "--window",
            str(args.window),
            "--lead",
            str(args.lead),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for i in range(2)
    ]
    for p in procs:  # both connected: 08:00 comes the lead and a head start later
        assert p.stdout is not None
        await p.stdout.readline()
    slot_wall = time.time() + args.lead + HEAD_START_S
    for p in procs:
        assert p.stdin is not None
        p.stdin.write(f"{slot_wall!r}\n".encode())
        await p.stdin.drain()
    outs = []
    for p in procs:
        out, _ = await p.communicate()
        outs.append(json.loads(out.decode().strip().splitlines()[-1]))
    await asyncio.sleep(0.5)
    await sub.unsubscribe()
    await bus.drain()
    conn = await asyncpg.connect(db)
    try:
        audit = await conn.fetchrow(
            "SELECT count(*) AS n, count(DISTINCT mower_id) AS m FROM fleet_audit_commands"
            " WHERE kind = 'start_mow' AND issued_by = 'scheduler'"
        )
    finally:
        await conn.close()
    return {"arrivals": arrivals, "slot_wall": slot_wall, "replicas": outs, "audit": dict(audit)}


def _report(args: argparse.Namespace, stats: dict[str, Any]) -> None:
    from contracts.v1 import decode_command  # noqa: PLC0415

    starts = [(at, decode_command(data)) for at, data in stats["arrivals"]]
    starts = [(at, e) for at, e in starts if e.kind == "start_mow"]
    if not starts:
        raise SystemExit("no start_mow arrived")
    late = sorted(max(0.0, at - stats["slot_wall"]) for at, _ in starts)
    mowers = {e.mower_id for _, e in starts}
    bus_doubles = len(starts) - len(mowers)
    audit = stats["audit"]
    audit_doubles = audit["n"] - audit["m"]
    span = max(late[-1], 1e-3)
    cpu = sum(r["cpu_s"] for r in stats["replicas"])
    p50, p99 = (
        statistics.median(late) * 1000,
        late[min(len(late) - 1, int(len(late) * 0.99))] * 1000,
    )
    print(
        f"scheduler: {len(mowers)} of {args.mowers} mowers started over {args.sites} sites,"
        f" claim={args.claim}, batch={args.batch}, interval={args.interval} s,"
        f" lead={args.lead} s;"
        f" replicas issued {[r['issued'] for r in stats['replicas']]}"
    )
    print(f"CPU of both replicas: {cpu:.1f} s = {cpu / len(mowers) * 1e6:.0f} us per slot")
    if len(mowers) != args.mowers:
        raise SystemExit(f"only {len(mowers)} of {args.mowers} mowers started")
    print(f"lateness p50 {p50:.0f} ms; CPU {cpu / len(mowers) * 1e6:.0f} us per slot")
    # The keys, exactly.
    print(
        f"RESULT scheduler_starts_per_s={len(mowers) / span:.0f}"
        f" scheduler_late_p99_ms={p99:.0f}"
        f" scheduler_double_starts={max(audit_doubles, bus_doubles)}"
    )


def main() -> None:
    """Run the benchmark (or, with ``--replica``, be one scheduler replica)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true", help="a few seconds only")
    parser.add_argument("--mowers", type=int, default=100_000)
    parser.add_argument("--sites", type=int, default=1_000)
    parser.add_argument("--claim", choices=["skip_locked", "advisory"], default="skip_locked")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--window", type=float, default=300.0)
    parser.add_argument(
        "--lead", type=float, default=30.0, help="claim a start this long ahead (0: at it)"
    )
    for hidden in ("--replica", "--db", "--nats"):
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.replica is not None:
        asyncio.run(_replica(args))
        return
    if args.smoke:
        args.mowers, args.sites, args.window = min(args.mowers, 1000), min(args.sites, 10), 30.0
        args.lead = min(args.lead, 3.0)
    nats = NatsServer()
    nats.start()
    db = create_database("mowdeck_bench")
    try:
        asyncio.run(_seed(db, args.mowers, args.sites))
        stats = asyncio.run(_watch(args, nats.url, db))
    finally:
        drop_database(db)
        nats.close()
    _report(args, stats)


if __name__ == "__main__":
    main()
