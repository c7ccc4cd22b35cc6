"""PostgreSQL's rows and WAL bytes per table, per state, command and notification.

The soak's system (``tests.soak.target``: every service, 1,000 simulated mowers, faults
that fire rules) runs under the soak's command load; between two moments the tables'
tuple counters and the WAL written (``pg_walinspect``, each record charged to the table
its first block belongs to, indexes and TOAST to their table) are divided by what drives
each table: a state published, a command issued or a notification (inbox item).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg

from tests.soak.load import drive

__all__ = ["DRIVERS", "driver_of", "measure_postgres"]

DRIVERS = ("state", "command", "notification")

_COUNTERS = """
select relname, n_tup_ins + n_tup_upd + n_tup_del as written, n_tup_ins as inserted,
       pg_total_relation_size(relid) as bytes, n_live_tup as live
from pg_stat_user_tables
"""
# Every WAL record charged to the table of its first block (an index's or TOAST's owner).
_WAL = """
with blocks as (
    select b.relfilenode, b.record_length
    from pg_get_wal_block_info($1::text::pg_lsn, $2::text::pg_lsn) b
    where b.block_id = 0 and b.reldatabase = (select oid from pg_database
                                              where datname = current_database())
), rels as (
    select pg_filenode_relation(0, relfilenode) as rel, sum(record_length) as wal
    from blocks group by relfilenode
)
select coalesce(t.relname, i.relname, c.relname) as relname, sum(r.wal)::bigint as wal
from rels r
join pg_class c on c.oid = r.rel
left join pg_index x on x.indexrelid = c.oid
left join pg_class i on i.oid = x.indrelid
left join pg_class t on t.reltoastrelid = c.oid
group by 1
"""


def driver_of(table: str) -> str:
    """What a table's writes follow: states, commands or notifications."""
    if table.startswith("fleet_") or table == "command_timeline":
        return "command"
    if table.startswith("notification_") and table != "notification_watches":
        return "notification"
    return "state"


async def _telemetry_messages(monitor_url: str) -> int:
    async with aiohttp.ClientSession() as http, http.get(f"{monitor_url}/jsz?streams=true") as r:
        body = await r.json()
    for account in body.get("account_details", []):
        for s in account.get("stream_detail", []):
            if s["name"] == "TELEMETRY":
                return int(s["state"]["messages"])
    return 0


async def _snapshot(pool: asyncpg.Pool) -> tuple[str, dict[str, asyncpg.Record]]:
    lsn = await pool.fetchval("select pg_current_wal_lsn()::text")
    return lsn, {r["relname"]: r for r in await pool.fetch(_COUNTERS)}


async def _window(info: dict[str, Any], seconds: float, warmup: float) -> dict[str, Any]:
    async with asyncpg.create_pool(info["database_url"], min_size=1, max_size=2) as pool:
        await pool.execute("create extension if not exists pg_walinspect")
        rate = len(info["mowers"]) / 180.0
        warm = asyncio.create_task(
            drive(
                info["fleet_url"], info["token"], info["mowers"], rate=rate, seconds=warmup, seed=2
            )
        )
        await warm
        lsn0, before = await _snapshot(pool)
        states0 = await _telemetry_messages(info["nats_monitor_url"])
        counts = await drive(
            info["fleet_url"], info["token"], info["mowers"], rate=rate, seconds=seconds, seed=3
        )
        lsn1, after = await _snapshot(pool)
        states = await _telemetry_messages(info["nats_monitor_url"]) - states0
        wal = {r["relname"]: r["wal"] for r in await pool.fetch(_WAL, lsn0, lsn1)}
        total_wal = await pool.fetchval("select $2::text::pg_lsn - $1::text::pg_lsn", lsn0, lsn1)
    notifications = (
        after["notification_inbox"]["inserted"] - before["notification_inbox"]["inserted"]
    )
    per = {"state": states, "command": counts["issued"], "notification": notifications}
    tables: dict[str, Any] = {}
    for name, row in after.items():
        driver = driver_of(name)
        units = max(1, per[driver])
        written = row["written"] - before[name]["written"] if name in before else row["written"]
        tables[name] = {
            "driver": driver,
            "rows_per_unit": written / units,
            "inserted_per_unit": (row["inserted"] - before[name]["inserted"]) / units
            if name in before else 0.0,
            "wal_bytes_per_unit": wal.get(name, 0) / units,
            "bytes_per_live_row": row["bytes"] / row["live"] if row["live"] else 0.0,
        }  # fmt: skip
    return {
        "seconds": seconds,
        "mowers": len(info["mowers"]),
        "units": per,
        "wal_bytes_total": int(total_wal),
        "wal_bytes_charged": int(sum(wal.values())),
        "tables": tables,
    }


async def measure_postgres(mowers: int = 1000, seconds: float = 120.0) -> dict[str, Any]:
    """Run the soak's system and measure its tables over ``seconds`` after a warm-up."""
    with tempfile.TemporaryDirectory(prefix="mowdeck-capacity-pg-") as work:
        info_file = Path(work) / "info.json"
        cmd = [sys.executable, "-m", "tests.soak.target", "--mowers", str(mowers),
               "--interval", "60", "--info", str(info_file),
               "--samples", str(Path(work) / "samples.jsonl")]  # fmt: skip
        log = (Path(work) / "target.log").open("wb")
        proc = subprocess.Popen(cmd, stderr=log)  # noqa: ASYNC220 - waited for in a thread
        try:
            while not await asyncio.to_thread(
                lambda: info_file.exists() and info_file.stat().st_size > 0
            ):
                if proc.poll() is not None:
                    raise RuntimeError(f"the system exited: see {work}/target.log")
                await asyncio.sleep(0.5)
            info = json.loads(await asyncio.to_thread(info_file.read_text))
            return await _window(info, seconds, warmup=30.0)
        finally:
            proc.send_signal(signal.SIGTERM)
            await asyncio.to_thread(proc.wait, 120)
            log.close()


if __name__ == "__main__":
    print(
        json.dumps(
            asyncio.run(measure_postgres(seconds=float(sys.argv[1]) if len(sys.argv) > 1 else 60)),
            indent=1,
        )
    )
