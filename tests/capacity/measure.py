"""``python -m tests.capacity measure``: the per-message costs, written to costs.json.

CPU time of the processes (from /proc or getrusage), never wall time: the machine's two
cores are shared, so a rate moves from hour to hour while the CPU per message moves far
less. Each part reuses a benchmark's set-up (``tests/bench``) where one measures it.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.capacity.gateway_load import gateway_load
from tests.capacity.nats_costs import measure_nats
from tests.capacity.pg_costs import measure_postgres
from tests.capacity.telemetry_load import telemetry_load

__all__ = ["COSTS", "gateway_costs", "measure"]

COSTS = Path(__file__).with_name("costs.json")

# Not re-measured by this command, with where each figure comes from.
DOCUMENTED = {
    "fleet_list_us_per_registration": {
        "value": 12.5,
        "source": "docs/performance.md, slow_queries: registrations_10k_max_ms=124.6",
    },
}


def _output(module: str, *args: str) -> str:
    """What a benchmark printed."""
    return subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, check=True
    ).stdout


def _numbers(line: str) -> dict[str, float]:
    return {k: float(v) for k, v in re.findall(r"(\w+)=([-\d.]+)", line)}


def _bench(module: str, *args: str) -> dict[str, float]:
    """Run a benchmark and return the numbers of its RESULT line."""
    out = _output(module, *args)
    return _numbers(next(x for x in reversed(out.splitlines()) if x.startswith("RESULT")))


def _realtime(quick: bool) -> dict[str, Any]:
    """Realtime's CPU per event delivered to a client (its process alone)."""
    run = _bench("tests.bench.realtime", *(["--smoke"] if quick else []))
    return {"cpu_us_per_delivered_event": run["cpu_ms_per_1000"], "run": run}


def _fleet(quick: bool) -> dict[str, Any]:
    """Fleet's CPU per command accepted (``POST .../commands``, its process alone)."""
    out = _output("tests.bench.fleet", *(["--smoke"] if quick else ["--duration", "20"]))
    lines = out.splitlines()
    run = _numbers(next(x for x in reversed(lines) if x.startswith("RESULT")))
    cpu = next(x for x in lines if x.startswith("CPU while measuring"))
    run.update(_numbers(cpu.split(":", 1)[1]))
    return {"cpu_us_per_command": run["fleet"] / run["requests_per_s"] * 1e6, "run": run}


def _machine() -> dict[str, Any]:
    model = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")), "unknown",
    )  # fmt: skip
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "load_average": os.getloadavg(),
    }


def gateway_costs(run: dict[str, Any], two: dict[str, Any]) -> dict[str, float]:
    """Costs from the windows of one shard and of two.

    Idle, a shard's CPU is its states times a cost per state plus its own upkeep (timers,
    the NATS connection, metrics): ``cpu = states * a + shards * b * seconds``, solved for
    the two runs. Loaded, the rest per command is the command's cost. Every shard receives
    every command (ADR 0013's static sharding: a shard acknowledges another's commands
    without acting), so the second shard's extra CPU per command is the cost of a command
    of another shard.
    """
    idle1, idle2 = sum(run["idle_cpu_s"]), sum(two["idle_cpu_s"])
    # idle1 = s1 * a + b * t1 and idle2 = s2 * a + 2 * b * t2.
    s1, s2, t1, t2 = run["idle_states"], two["idle_states"], run["idle_s"], two["idle_s"]
    shard = max(0.0, (idle2 - idle1 * s2 / s1) / (2 * t2 - t1 * s2 / s1))
    per_state = (idle1 - shard * t1) / s1
    loaded_cpu = sum(run["loaded_cpu_s"]) - shard * run["loaded_s"]
    per_command = (loaded_cpu - run["loaded_states"] * per_state) / run["commands"]
    own = (
        two["loaded_states"] * per_state
        + two["commands"] * per_command
        + 2 * shard * two["loaded_s"]
    )
    foreign = (sum(two["loaded_cpu_s"]) - own) / two["commands"]
    return {
        "cpu_us_per_state": per_state * 1e6,
        "cpu_us_per_command": per_command * 1e6,
        "cpu_us_per_foreign_command": max(0.0, foreign) * 1e6,
        "shard_cores": shard,
        "cpu_us_per_mower_s_at_heartbeat": idle1 / t1 / run["mowers"] * 1e6,
    }


def _telemetry(one: dict[str, Any], two: dict[str, Any]) -> dict[str, float]:
    """Per state, and each replica's own CPU beyond it: a replica that shares the stream
    cuts smaller batches, and each batch costs the same work again."""
    elapsed1 = one["states"] / one["states_per_s"]
    elapsed2 = two["states"] / two["states_per_s"]
    cpu1 = one["cpu_us_per_state"] * one["states"] * 1e-6
    cpu2 = two["cpu_us_per_state"] * two["states"] * 1e-6
    # cpu = states * a + replicas * b * elapsed, solved for the two runs.
    b = max(0.0, (cpu2 / two["states"] - cpu1 / one["states"])
            / (2 * elapsed2 / two["states"] - elapsed1 / one["states"]))  # fmt: skip
    a = (cpu1 - b * elapsed1) / one["states"]
    return {"cpu_us_per_state": a * 1e6, "replica_cores": b,
            "server_cpu_us_per_state": one["server_cpu_us_per_state"]}  # fmt: skip


async def measure(quick: bool = False) -> dict[str, Any]:
    """Every cost; ``quick`` takes smaller samples (a check that the parts run)."""
    nats = await measure_nats(10_000 if quick else 60_000)
    seconds, idle = (5.0, 10.0) if quick else (20.0, 30.0)
    gw = await gateway_load(1, 1000, 300.0, seconds, idle_s=idle)
    gw2 = await gateway_load(2, 1000, 300.0, seconds, idle_s=idle)
    tel, tel2 = await telemetry_load([1, 2], rounds=5 if quick else 60)
    notif = _bench(
        "tests.bench.notifications_replay", "--mowers", "2000", "--rounds",
        "3" if quick else "8", "--batch", "500",
    )  # fmt: skip
    deliveries = _bench("tests.bench.deliveries", "--messages", "10000" if quick else "60000",
                        "--rounds", "1" if quick else "3")  # fmt: skip
    pg = await measure_postgres(seconds=30.0 if quick else 150.0)
    return {
        **measure_services(quick),
        "measured_at": datetime.now(UTC).isoformat(timespec="minutes"),
        "machine": _machine(),
        "command": "python -m tests.capacity measure" + (" --quick" if quick else ""),
        "gateway": {**gateway_costs(gw, gw2), "run": gw, "run_2_shards": gw2},
        "telemetry": {**_telemetry(tel, tel2), "run": tel, "run_2_replicas": tel2},
        "notifications": {
            "cpu_us_per_state": notif["cpu_us_per_state"] + deliveries["direct_us_per_delivery"],
            "rules_cpu_us_per_state": notif["cpu_us_per_state"],
            "delivery_cpu_us": deliveries["direct_us_per_delivery"],
        },
        "nats": nats,
        "postgres": pg,
        "documented": DOCUMENTED,
    }


def measure_services(quick: bool = False) -> dict[str, Any]:
    """Realtime's and Fleet's costs, each from its benchmark (about 2 minutes)."""
    return {"realtime": _realtime(quick), "fleet": _fleet(quick)}


def main(quick: bool, out: Path = COSTS, *, only_services: bool = False) -> int:
    """Measure and write the costs; ``only_services``: Realtime's and Fleet's alone,
    into the costs written before."""
    if only_services:
        costs = {**json.loads(out.read_text()), **measure_services(quick)}
    else:
        costs = asyncio.run(measure(quick))
    out.write_text(json.dumps(costs, indent=1, sort_keys=True) + "\n")
    print(f"wrote {out}")
    return 0
