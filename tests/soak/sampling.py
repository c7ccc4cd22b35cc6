"""What the soak samples inside the soaked process: streams, processes, PostgreSQL's pid."""

from __future__ import annotations

import contextlib
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg

from mowdeck.kit.allocator import malloc_usage
from tests.soak.procs import ProcSample, descendants, sample

__all__ = ["TABLES", "heap", "postmaster", "processes", "relation_files", "streams"]

TABLES = """
select relname, n_live_tup, pg_total_relation_size(relid)
from pg_stat_user_tables order by relname
"""


async def streams(http: aiohttp.ClientSession, monitor_url: str | None) -> dict[str, Any]:
    if monitor_url is None:
        return {}
    async with http.get(f"{monitor_url}/jsz?streams=true") as resp:
        body = await resp.json()
    streams: dict[str, Any] = {}
    for account in body.get("account_details", []):
        for s in account.get("stream_detail", []):
            state = s.get("state", {})
            streams[s["name"]] = {
                "messages": state.get("messages", 0),
                "bytes": state.get("bytes", 0),
            }
    return streams


def processes(pid: int, postmaster: int) -> dict[str, dict[str, Any]]:
    """This process, its children by name, and PostgreSQL's postmaster with its backends."""
    groups: dict[str, ProcSample] = {"demo": sample(pid)}
    # The postmaster runs detached (pg_ctl): found through its data directory instead.
    backends = dict.fromkeys(descendants(postmaster), "postgres")
    trees = {**descendants(pid), postmaster: "postgres", **backends}
    for child, name in trees.items():
        with contextlib.suppress(OSError):
            got = sample(child)
            groups[name] = groups[name] + got if name in groups else got
    return {name: vars(s) for name, s in groups.items()}


async def postmaster(pool: asyncpg.Pool) -> int:
    data = await pool.fetchval("select setting from pg_settings where name = 'data_directory'")
    return int((Path(data) / "postmaster.pid").read_text().split()[0])


async def relation_files(pool: asyncpg.Pool) -> int:
    """How many files the database's relations (and the shared catalogs) have on disk: the
    most a backend can hold open for them."""
    data, oid = await pool.fetchrow(
        "select current_setting('data_directory'), oid from pg_database"
        " where datname = current_database()"
    )
    return sum(len(list((Path(data) / part).iterdir())) for part in (f"base/{oid}", "global"))


def heap() -> dict[str, float]:
    """Where this process's memory is: Python's small-object blocks, what the C allocator
    holds in use and free (a leak of a C extension, or fragmentation), and, while
    ``tracemalloc`` runs, what Python allocations it traces."""
    out: dict[str, float] = {"py_blocks": sys.getallocatedblocks()}
    usage = malloc_usage()
    if usage is not None:
        out["malloc_used_mb"] = round(usage[0] / 1e6, 2)
        out["malloc_free_mb"] = round(usage[1] / 1e6, 2)
    if tracemalloc.is_tracing():
        out["traced_mb"] = round(tracemalloc.get_traced_memory()[0] / 1e6, 2)
    return out
