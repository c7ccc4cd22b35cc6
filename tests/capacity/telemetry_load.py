"""Telemetry's CPU per state with one or more replicas, each in a process of its own.

The replicas are built as ``tests.bench.telemetry`` builds its service (``mowdeck
telemetry``'s composition, no seed, no retention) and share its durable consumer, as
replicas do. The benchmark's two publishers (two gateway shards' worth of 1,000 mowers,
the realistic mix) publish ``rounds`` states per mower as fast as they can; the replicas'
CPU (from /proc) and nats-server's over the time until every state is acknowledged.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any

import asyncpg

from mowdeck.authn import TokenVerifier
from mowdeck.authz import InMemoryTupleStore, LocalAuthorizer
from mowdeck.kit.allocator import tune_allocator
from mowdeck.kit.bus import Bus
from mowdeck.kit.migrate import discover, migrate, sql_root
from mowdeck.telemetry.cli import configure_gc, freezing_service
from mowdeck.telemetry.parts import STATES_DURABLE
from mowdeck.telemetry.settings import TelemetrySettings
from tests.bench.telemetry import AUTH, PUBLISHERS, TABLES, drained, fresh_stream
from tests.soak.procs import cpu_seconds
from tests.support.natsserver import NatsServer
from tests.support.postgres import create_database, drop_database

__all__ = ["replica_main", "telemetry_load"]


async def replica_main(nats_url: str, database_url: str) -> None:
    """One replica's process: run the service until standard input closes."""
    # Standard output is the conversation with the parent: everything else (the logs)
    # goes to standard error.
    talk = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    settings = TelemetrySettings(
        nats_url=nats_url, database_url=database_url, http_port=0, log_level="warning"
    )
    configure_gc(settings)
    if settings.malloc_tuning:  # as `mowdeck telemetry` does (kit.cli.run_service)
        tune_allocator()
    async with asyncpg.create_pool(database_url, min_size=2, max_size=8) as pool:
        service = freezing_service(
            settings,
            pool=pool,
            authorizer=LocalAuthorizer(InMemoryTupleStore()),
            verifier=TokenVerifier(AUTH),
            seed=False,
            retention=False,
        )
        await service.start()
        print("ready", file=talk, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        await service.stop()


async def _spawn(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def _line(proc: asyncio.subprocess.Process) -> str:
    assert proc.stdout is not None  # created with a pipe
    return (await proc.stdout.readline()).decode().strip()


async def _say(proc: asyncio.subprocess.Process, text: str) -> None:
    assert proc.stdin is not None  # created with a pipe
    proc.stdin.write(text.encode() + b"\n")
    await proc.stdin.drain()


async def _round(
    bus: Bus, server: NatsServer, url: str, replicas: int, rounds: int
) -> dict[str, Any]:
    await fresh_stream(bus)
    reps = [await _spawn("tests.capacity.telemetry_load", server.url, url) for _ in range(replicas)]
    for rep in reps:
        if await _line(rep) != "ready":
            raise RuntimeError("a replica did not start")
    pubs = [
        await _spawn("tests.bench.telemetry", "--publish", server.url, "--rounds", str(rounds),
                     "--part", f"{part}/{PUBLISHERS}")
        for part in range(PUBLISHERS)
    ]  # fmt: skip
    for pub in pubs:
        await _line(pub)  # ready
    pids = [r.pid for r in reps]
    cpu0, server0 = [cpu_seconds(p) for p in pids], cpu_seconds(server.pid)
    started = time.perf_counter()
    for pub in pubs:
        await _say(pub, "go")
    for pub in pubs:
        await _line(pub)
        await pub.wait()
    await drained(bus, STATES_DURABLE)
    elapsed = time.perf_counter() - started
    cpu = [cpu_seconds(p) - c for p, c in zip(pids, cpu0, strict=True)]
    server_cpu = cpu_seconds(server.pid) - server0
    for rep in reps:
        await _say(rep, "stop")
        await rep.wait()
    states = 1000 * rounds
    return {
        "replicas": replicas,
        "states": states,
        "states_per_s": states / elapsed,
        "replica_cores": [c / elapsed for c in cpu],
        "cpu_us_per_state": sum(cpu) / states * 1e6,
        "server_cpu_us_per_state": server_cpu / states * 1e6,
    }


async def telemetry_load(replica_counts: list[int], rounds: int = 30) -> list[dict[str, Any]]:
    """One round per replica count, each on a fresh stream and empty tables."""
    server = NatsServer()
    server.start()
    url = await asyncio.to_thread(create_database, "mowdeck_capacity")
    try:
        await migrate(url, discover(sql_root(), ["telemetry"]))
        bus = await Bus.connect(server.url, name="capacity")
        out = []
        async with asyncpg.create_pool(url, min_size=1, max_size=2) as pool:
            for n in replica_counts:
                await pool.execute(f"TRUNCATE {TABLES}")
                out.append(await _round(bus, server, url, n, rounds))
        await bus.drain()
        return out
    finally:
        server.close()
        await asyncio.to_thread(drop_database, "mowdeck_capacity")


if __name__ == "__main__":
    asyncio.run(replica_main(sys.argv[1], sys.argv[2]))
