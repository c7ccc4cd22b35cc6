"""CPU share and memory of one ``mowdeck sim`` process at 1,000 and 10,000 mowers.

Each mower is mowing (``--autostart``) and reports a state every simulated second at 1x,
and every mower's WebSocket is open to a consumer in this process that reads and decodes
every state, so the figure includes physics, serialisation and WebSocket writes. Only the
simulator process is measured (``/proc/<pid>/stat`` and ``VmRSS``).

    python tests/bench/simulator.py            # 1,000 and 10,000 mowers, 10 s each
    python tests/bench/simulator.py --smoke    # 100 and 300 mowers, 2 s each (CI)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import msgspec

# Imports nothing from the project: run as a script, tests/bench/ shadows package names.

_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Consumer:
    """Holds one WebSocket per mower and counts the states that arrive."""

    def __init__(self) -> None:
        self.states = 0
        self.tasks: list[asyncio.Task[None]] = []

    async def _one(self, http: aiohttp.ClientSession, url: str, ready: asyncio.Semaphore) -> None:
        async with http.ws_connect(url, max_msg_size=1 << 20) as ws:
            ready.release()
            async for msg in ws:
                if b'"type":"state"' in msg.data:
                    self.states += 1

    async def connect_all(self, http: aiohttp.ClientSession, urls: list[str]) -> None:
        gate = asyncio.Semaphore(200)  # connect in waves, not 10,000 handshakes at once
        for url in urls:
            await gate.acquire()
            self.tasks.append(asyncio.create_task(self._one(http, url, gate)))
        for _ in range(200):
            await gate.acquire()

    async def close(self) -> None:
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def measure(mowers: int, seconds: float) -> tuple[float, float, float]:
    """(cpu %, rss MB, states/s received) of a simulator with ``mowers`` mowers."""
    with tempfile.TemporaryDirectory() as tmp:
        boot = Path(tmp) / "mowers.json"
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "mowdeck.cli",
            "sim",
            "--mowers",
            str(mowers),
            "--listen",
            "127.0.0.1:0",
            "--seed",
            "1",
            "--autostart",
            "--log-level",
            "warning",
            "--bootstrap-file",
            str(boot),
            stdout=asyncio.subprocess.PIPE,
        )
        try:
            assert proc.stdout is not None
            await asyncio.wait_for(proc.stdout.readline(), 60)
            regs = msgspec.json.decode(boot.read_bytes(), type=list[dict[str, Any]])
            consumer = Consumer()
            connector = aiohttp.TCPConnector(limit=0)
            async with aiohttp.ClientSession(connector=connector) as http:
                await consumer.connect_all(http, [r["connection"]["options"]["url"] for r in regs])
                await asyncio.sleep(2.0)  # steady state: every link open, reports spread
                health = regs[0]["connection"]["options"]["url"].split("/mowers/")[0]
                health = health.replace("ws://", "http://") + "/healthz"
                h0 = await (await http.get(health)).json()
                cpu0, t0, n0 = _cpu_seconds(proc.pid), time.monotonic(), consumer.states
                await asyncio.sleep(seconds)
                cpu1, t1, n1 = _cpu_seconds(proc.pid), time.monotonic(), consumer.states
                h1 = await (await http.get(health)).json()
                rss = _rss_mb(proc.pid)
                sent = (h1["states_sent"] - h0["states_sent"]) / (t1 - t0)
                skipped = (h1["states_skipped"] - h0["states_skipped"]) / (t1 - t0)
                print(
                    f"  simulator sent {sent:.0f} states/s, skipped {skipped:.0f}/s "
                    "(consumer lagging)",
                    flush=True,
                )
                await consumer.close()
        finally:
            proc.terminate()
            await proc.wait()
    return 100.0 * (cpu1 - cpu0) / (t1 - t0), rss, (n1 - n0) / (t1 - t0)


async def main() -> int:
    """Run the benchmark and print the RESULT line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="small and fast, for CI")
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    small, large = (100, 300) if args.smoke else (1_000, 10_000)
    seconds = 2.0 if args.smoke else args.seconds
    figures: dict[str, float] = {}
    for label, n in (("1k", small), ("10k", large)):
        cpu, rss, rate = await measure(n, seconds)
        print(
            f"{n} mowers: cpu {cpu:.1f} % of one core, rss {rss:.0f} MB, "
            f"{rate:.0f} states/s received (expected ~{n})",
            flush=True,
        )
        if rate < 0.8 * n:
            print(f"FAIL: only {rate:.0f} states/s of {n} expected", file=sys.stderr)
            return 1
        figures[f"cpu_{label}_pct"], figures[f"rss_{label}_mb"] = cpu, rss
    tag = " smoke=1" if args.smoke else ""
    print("RESULT " + " ".join(f"{k}={v:.1f}" for k, v in figures.items()) + tag)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
