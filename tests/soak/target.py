"""The soaked system: ``mowdeck demo``'s services in this process, sampled from inside.

Run by ``python -m tests.soak``; not meant to be started by hand. The demo runs with its
simulator at real time and a periodic state (heartbeat) every 10 s; a mower that is
moving also reports once a second, as a real one reports its changes. Notification rules
fire: every ``--fault-every`` seconds one mower gets a low battery or gets stuck, and its
faults are cleared a minute later. Every ``--interval`` seconds one JSON line goes to
``--samples``: this process's tasks, threads, memory and open files, its child processes
(nats-server, PostgreSQL) grouped by name, the streams' and the tables' sizes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg

from mowdeck.demo.running import Demo, running_demo
from mowdeck.kit.allocator import TRIMS
from mowdeck.kit.embedded import EmbeddedPostgres
from mowdeck.kit.logging import configure_logging
from simulator import BatteryFault, Fault, LinkLossFault, SimulatorServer, StuckFault
from tests.soak.sampling import (
    TABLES,
    heap,
    postmaster,
    processes,
    relation_files,
    streams,
)
from tests.soak.tracing import MemoryTrace

MOVING = frozenset({"leaving", "mowing", "returning", "manual"})


def _simulator(demo: Demo) -> SimulatorServer:
    for service in demo.services:
        if service.name == "simulator":
            server: SimulatorServer = service.server  # type: ignore[attr-defined]
            return server
    raise RuntimeError("the demo has no simulator")


async def _report_moving(sim: SimulatorServer) -> None:
    """Once a second, a state from every mower that is moving (its changes)."""
    fleet = sim.fleet
    while True:
        await asyncio.sleep(1.0)
        for i, mower in enumerate(fleet.mowers):
            if mower.body.activity in MOVING:
                await fleet.report(i)


async def _faults(sim: SimulatorServer, every: float, rng: random.Random) -> None:
    """Make rules fire: a low battery, a stuck mower or a lost link, cleared a minute later.

    A moving mower is chosen when there is one: a docked mower charges its battery back
    and cannot get stuck, so its faults fire no rule.
    """
    fleet = sim.fleet
    pending: list[tuple[float, Any]] = []
    while True:
        await asyncio.sleep(every)
        now = time.monotonic()
        for at, mower_id in [p for p in pending if p[0] <= now]:
            pending.remove((at, mower_id))
            await sim.clear_faults(mower_id)
        moving = [m for m in fleet.mowers if m.body.activity in MOVING]
        mower_id = rng.choice(moving or fleet.mowers).mower_id
        draw = rng.random()
        fault: Fault = (
            BatteryFault(level=rng.uniform(5, 15)) if draw < 0.4
            else StuckFault() if draw < 0.8
            else LinkLossFault(seconds=20.0)
        )  # fmt: skip
        await sim.inject(mower_id, fault)
        pending.append((now + 60.0, mower_id))


async def _sampler(demo: Demo, pool: asyncpg.Pool, path: Path, interval: float) -> None:
    pid = os.getpid()
    sim = _simulator(demo)
    postmaster_pid = await postmaster(pool)
    start = time.monotonic()
    async with aiohttp.ClientSession() as http:
        with path.open("a") as out:
            while True:
                tables = {r[0]: {"rows": r[1], "bytes": r[2]} for r in await pool.fetch(TABLES)}
                line = {
                    "t": round(time.monotonic() - start, 1),
                    "tasks": len(asyncio.all_tasks()),
                    "python_threads": threading.active_count(),
                    "heap": heap(),
                    "trims": {
                        "count": TRIMS.count,
                        "seconds": round(TRIMS.seconds, 4),
                        "longest_ms": round(TRIMS.longest * 1000, 3),
                    },
                    "processes": processes(pid, postmaster_pid),
                    "relation_files": await relation_files(pool),
                    "simulator_commands": sum(m.remembered() for m in sim.fleet.mowers),
                    "streams": await streams(http, demo.nats.monitor_url if demo.nats else None),
                    "tables": tables,
                }
                out.write(json.dumps(line) + "\n")
                out.flush()
                await asyncio.sleep(interval)


async def _run(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    with tempfile.TemporaryDirectory(prefix="mowdeck-soak-") as state_dir:
        pg = EmbeddedPostgres()
        await asyncio.to_thread(pg.start)
        try:
            os.environ["MOWDECK_DATABASE_URL"] = pg.url
            demo_args = argparse.Namespace(
                mowers=args.mowers, speed=1.0, seed=args.seed, host="127.0.0.1", port=0,
                prometheus=False, state_dir=state_dir, report_interval=10.0,
            )  # fmt: skip
            async with (
                running_demo(demo_args) as demo,
                asyncpg.create_pool(pg.url, min_size=1, max_size=1) as pool,
            ):
                sim = _simulator(demo)
                monitor = demo.nats.monitor_url if demo.nats else None
                info = {"token": demo.token, "fleet_url": demo.fleet_url,
                        "mowers": [str(m) for m in demo.mowers], "pid": os.getpid(),
                        "database_url": pg.url, "nats_monitor_url": monitor}  # fmt: skip
                await asyncio.to_thread(Path(args.info).write_text, json.dumps(info))
                trace = MemoryTrace(args.tracemalloc_after)
                tasks = [
                    asyncio.create_task(_report_moving(sim), name="soak-moving"),
                    asyncio.create_task(
                        _faults(sim, args.fault_every, random.Random(args.seed)), name="soak-faults"
                    ),
                    asyncio.create_task(
                        _sampler(demo, pool, Path(args.samples), args.interval), name="soak-sampler"
                    ),
                ]
                if args.tracemalloc_after >= 0:
                    tasks.append(asyncio.create_task(trace.run(), name="soak-trace"))
                await stop.wait()
                trace.write(Path(args.samples).with_name("tracemalloc.txt"))
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            await asyncio.to_thread(pg.close)


def main() -> None:
    """Run the soaked system until SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m tests.soak.target")
    parser.add_argument("--mowers", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--fault-every", type=float, default=2.0)
    parser.add_argument("--info", required=True)
    parser.add_argument("--samples", required=True)
    parser.add_argument("--tracemalloc-after", type=float, default=-1.0)
    args = parser.parse_args()
    configure_logging(os.environ.get("MOWDECK_LOG_LEVEL", "warning"), "json")
    asyncio.run(_run(args))


if __name__ == "__main__":
    main()
