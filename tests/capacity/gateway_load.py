"""Gateway shards' CPU at a given load: connected mowers' states and a command rate.

``n`` gateway shards (``mowdeck gateway`` processes, ``MOWDECK_SHARD_INDEX`` of
``MOWDECK_SHARD_COUNT``) in front of one ``mowdeck sim`` whose mowers report every 10 s
(the heartbeat), set up as ``tests.bench.gateway`` sets up its one shard (this process
answers ``fleet.mowers.list``). Two windows: idle (only states flow), then ``rate``
commands a second, open loop, until every command has its final result. The shards' CPU
(from /proc) and the states they published (the TELEMETRY stream) in each window.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp

from contracts.v1 import SetBladeHeight, decode_result
from contracts.v1.subjects import TELEMETRY
from mowdeck.commands.streams import apply_all
from mowdeck.kit.bus import Bus
from tests.bench.gateway import Fleet, envelope, gauge, process, publish
from tests.soak.procs import cpu_seconds
from tests.support.natsserver import NatsServer, free_port

__all__ = ["ShardedFleet", "gateway_load"]


class ShardedFleet(Fleet):
    """The benchmark's simulator and gateway, the gateway as ``shards`` shards."""

    def __init__(self, nats: NatsServer, n: int, workdir: Path, shards: int) -> None:
        super().__init__(nats, n, workdir, heartbeat=10.0, report_interval=10.0)
        self.shards = shards
        self.ports = [free_port() for _ in range(shards)]

    @contextlib.contextmanager
    def run_shards(self) -> Iterator[list[int]]:
        """Start the simulator and the shards; yields the shards' process ids."""
        with contextlib.ExitStack() as stack:
            _, self.mowers = stack.enter_context(self._simulator(self.n, self.sim_port, 1))
            pids = []
            for i, port in enumerate(self.ports):
                env = {
                    "MOWDECK_NATS_URL": self.nats.url,
                    "MOWDECK_HTTP_PORT": str(port),
                    "MOWDECK_LOG_LEVEL": "warning",
                    "MOWDECK_LOG_FORMAT": "json",
                    "MOWDECK_TELEMETRY_HEARTBEAT_SECONDS": str(self.heartbeat),
                    "MOWDECK_FLEET_RETRY_MAX_SECONDS": "1",
                    "MOWDECK_GATEWAY_DEVICE_HOSTS": json.dumps([f"127.0.0.1:{self.sim_port}"]),
                    "MOWDECK_SHARD_INDEX": str(i),
                    "MOWDECK_SHARD_COUNT": str(self.shards),
                }
                cmd = [sys.executable, "-m", "mowdeck.cli", "gateway"]
                gw = stack.enter_context(process(cmd, env, self.workdir / f"gateway-{i}.log"))
                pids.append(gw.pid)
            yield pids

    async def connected(self, http: aiohttp.ClientSession, timeout: float = 300) -> None:
        """Wait until the shards together hold every mower's connection."""
        deadline = time.monotonic() + timeout
        name = "mowdeck_gateway_mowers_connected"
        while True:
            with contextlib.suppress(aiohttp.ClientError):
                urls = [f"http://127.0.0.1:{p}" for p in self.ports]
                if sum([await gauge(http, u, name) for u in urls]) >= self.n:
                    return
            if time.monotonic() > deadline:
                raise RuntimeError("the shards did not connect every mower")
            await asyncio.sleep(0.5)


async def _messages(bus: Bus) -> int:
    return int((await bus.js.stream_info(TELEMETRY.name)).state.messages)


def _cpu(pids: list[int]) -> list[float]:
    return [cpu_seconds(p) for p in pids]


async def _commands(bus: Bus, fleet: Fleet, rate: float, seconds: float) -> int:
    """``rate`` commands a second for ``seconds``; returns once each has a final result."""
    finals: set[Any] = set()

    async def on(msg: Any) -> None:
        result = decode_result(msg.data)
        if result.is_final:
            finals.add(result.command_id)

    sub = await bus.nc.subscribe("command.result.mower.*", cb=on)
    total = int(rate * seconds)
    envs = [
        envelope(fleet.mowers[i % len(fleet.mowers)], SetBladeHeight(height_mm=20 + i % 80))
        for i in range(total)
    ]
    start, acks = time.perf_counter(), []
    for i, env in enumerate(envs):
        acks.append(await publish(bus, env))
        ahead = (i + 1) / rate - (time.perf_counter() - start)
        if ahead > 0:
            await asyncio.sleep(ahead)
    await asyncio.gather(*acks)
    deadline = time.monotonic() + 120
    while len(finals) < total and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    await sub.unsubscribe()
    return len(finals)


async def gateway_load(
    shards: int, mowers: int, rate: float, seconds: float, idle_s: float = 20.0
) -> dict[str, Any]:
    """The shards' CPU and states in an idle window and under ``rate`` commands a second."""
    nats = NatsServer()
    nats.start()
    workdir = Path(tempfile.mkdtemp(prefix="mowdeck-capacity-gw-"))
    try:
        bus = await Bus.connect(nats.url, name="capacity")
        await apply_all(bus)
        fleet = ShardedFleet(nats, mowers, workdir, shards)
        with fleet.run_shards() as pids:
            await fleet.serve_fleet_list(bus)
            async with aiohttp.ClientSession() as http:
                await fleet.connected(http)
            await _commands(bus, fleet, min(rate, 200.0), 5.0)  # warm-up: actors, paths
            await asyncio.sleep(10.0)  # the warm-up's states settle
            m0, c0, t0 = await _messages(bus), _cpu(pids), time.perf_counter()
            await asyncio.sleep(idle_s)
            m1, c1, t1 = await _messages(bus), _cpu(pids), time.perf_counter()
            done = await _commands(bus, fleet, rate, seconds)
            m2, c2, t2 = await _messages(bus), _cpu(pids), time.perf_counter()
        await bus.drain()
    finally:
        nats.close()
    return {
        "shards": shards,
        "mowers": mowers,
        "idle_s": t1 - t0,
        "idle_states": m1 - m0,
        "idle_cpu_s": [b - a for a, b in zip(c0, c1, strict=True)],
        "loaded_s": t2 - t1,
        "loaded_states": m2 - m1,
        "loaded_cpu_s": [b - a for a, b in zip(c1, c2, strict=True)],
        "commands": done,
        "rate": rate,
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(gateway_load(int(sys.argv[1]), 1000, 300.0, 15.0))))
