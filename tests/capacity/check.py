"""``python -m tests.capacity check``: the model's CPU against a benchmark's, on this machine.

The model says a component's CPU is its messages times its cost per message (``costs.json``),
split evenly over its shards or replicas, plus each shard's or replica's own upkeep.
Checked here at loads other than the measuring ones: 1 and 2 gateway shards (2,000
mowers, 400 commands a second: ``gateway_load``), and 1 and 2 Telemetry replicas (two
publishers at full speed: ``telemetry_load``). The messages counted in each run are the
model's input, so the error is the cost model's, not the workload's. Goal: within ±25 %.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tests.capacity.gateway_load import gateway_load
from tests.capacity.report import load_costs
from tests.capacity.telemetry_load import telemetry_load

__all__ = ["main"]

GOAL = 0.25


def _row(what: str, predicted: float, measured: float) -> tuple[str, float, float, float]:
    return what, predicted, measured, (predicted - measured) / measured


async def _gateway(costs: dict[str, Any], shards: int) -> list[tuple[str, float, float, float]]:
    gw = costs["gateway"]
    run = await gateway_load(shards, 2000, 400.0, 20.0, idle_s=30.0)
    state_s, command_s = gw["cpu_us_per_state"] * 1e-6, gw["cpu_us_per_command"] * 1e-6
    foreign_s = gw.get("cpu_us_per_foreign_command", 0.0) * 1e-6 * (shards - 1)
    upkeep = shards * gw.get("shard_cores", 0.0)
    idle_pred = run["idle_states"] * state_s / run["idle_s"] + upkeep
    loaded_pred = (
        run["loaded_states"] * state_s + run["commands"] * (command_s + foreign_s)
    ) / run["loaded_s"] + upkeep
    return [
        _row(f"gateway x{shards}, 2,000 mowers idle: cores", idle_pred,
             sum(run["idle_cpu_s"]) / run["idle_s"]),
        _row(f"gateway x{shards}, 400 commands/s: cores", loaded_pred,
             sum(run["loaded_cpu_s"]) / run["loaded_s"]),
        _row(f"gateway x{shards}, 400 commands/s: busiest shard's cores", loaded_pred / shards,
             max(run["loaded_cpu_s"]) / run["loaded_s"]),
    ]  # fmt: skip


async def _telemetry(costs: dict[str, Any]) -> list[tuple[str, float, float, float]]:
    per_state = costs["telemetry"]["cpu_us_per_state"]
    replica = costs["telemetry"].get("replica_cores", 0.0)
    out = []
    for run in await telemetry_load([1, 2], rounds=30):
        n, elapsed = run["replicas"], run["states"] / run["states_per_s"]
        out.append(_row(f"Telemetry x{n}, {run['states_per_s']:,.0f} states/s: CPU s",
                        run["states"] * per_state * 1e-6 + n * replica * elapsed,
                        run["cpu_us_per_state"] * run["states"] * 1e-6))  # fmt: skip
    return out


async def _check() -> list[tuple[str, float, float, float]]:
    costs = load_costs()
    rows = []
    for shards in (1, 2):
        rows += await _gateway(costs, shards)
    rows += await _telemetry(costs)
    return rows


def main() -> int:
    """Run the checks and print prediction, measurement and error."""
    rows = asyncio.run(_check())
    print("| check | predicted | measured | error |")
    print("|---|---|---|---|")
    for what, pred, meas, err in rows:
        print(f"| {what} | {pred:.3f} | {meas:.3f} | {err:+.0%} |")
    worst = max(abs(r[3]) for r in rows)
    within = sum(abs(r[3]) <= GOAL for r in rows)
    print(f"RESULT checks={len(rows)} within_25pct={within} worst_error_pct={worst * 100:.0f} "
          + " ".join(f"err{i}={r[3] * 100:+.0f}" for i, r in enumerate(rows)))  # fmt: skip
    return 0
