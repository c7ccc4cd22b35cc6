"""The plan as a table and a ``RESULT`` line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.capacity.model import Plan, Workload, plan

__all__ = ["load_costs", "main", "render"]

COSTS = Path(__file__).with_name("costs.json")
# Seconds TELEMETRY keeps a state (contracts/v1/subjects.py), and a stored state's size
# beyond its payload (subject, headers, the store's record).
TELEMETRY_MAX_AGE_S = 3600
STORED_OVERHEAD_BYTES = 150


def load_costs(path: Path = COSTS) -> dict[str, Any]:
    """The measured costs."""
    costs: dict[str, Any] = json.loads(path.read_text())
    return costs


def _k(n: float) -> str:
    return f"{n / 1e6:g}M" if n >= 1e6 else f"{n / 1e3:g}k"


def _rows(plans: list[Plan], costs: dict[str, Any]) -> list[tuple[str, list[str]]]:
    payload = costs["nats"]["r3"]["payload_bytes"] + STORED_OVERHEAD_BYTES

    def each(f: Any, fmt: str = "{:,.0f}") -> list[str]:
        return [fmt.format(f(p)) for p in plans]

    return [
        ("states/s (busiest hour)", each(lambda p: p.rates.states_per_s)),
        ("commands/s", each(lambda p: p.rates.commands_per_s, "{:,.1f}")),
        ("notifications/s", each(lambda p: p.rates.notifications_per_s, "{:,.1f}")),
        ("Realtime events/s", each(lambda p: p.rates.realtime_events_per_s)),
        ("gateway shards", each(lambda p: p.units["gateway_shards"])),
        ("Telemetry replicas", each(lambda p: p.units["telemetry"])),
        ("Notifications replicas", each(lambda p: p.units["notifications"])),
        ("Realtime replicas", each(lambda p: p.units["realtime"])),
        ("Fleet replicas", each(lambda p: p.units["fleet"])),
        ("NATS nodes (R3)", each(lambda p: p.units["nats_nodes"])),
        ("TELEMETRY streams (partitions)", each(lambda p: p.units["telemetry_streams"])),
        *[(f"cores: {name}", each(lambda p, n=name: p.cores[n], "{:,.2f}"))
          for name in plans[0].cores],
        ("cores in all", each(lambda p: p.total_cores, "{:,.1f}")),
        ("PostgreSQL rows/s", each(lambda p: sum(p.table_rows_per_s.values()))),
        ("PostgreSQL WAL MB/s", each(lambda p: p.wal_mb_per_s, "{:,.2f}")),
        ("PostgreSQL GB under retention", each(lambda p: sum(p.table_gb.values()), "{:,.1f}")),
        ("hottest table (rows/s)", [
            "{} ({:,.0f})".format(*max(p.table_rows_per_s.items(), key=lambda kv: kv[1]))
            for p in plans]),
        ("largest table (GB)", [
            "{} ({:,.1f})".format(*max(p.table_gb.items(), key=lambda kv: kv[1])) for p in plans]),
        ("TELEMETRY stream (GB, 1 h)", each(
            lambda p: p.rates.states_per_s * TELEMETRY_MAX_AGE_S * payload / 1e9, "{:,.1f}")),
        *[(f"use: {name}", each(lambda p, n=name: p.hotspots[n], "{:.0%}"))
          for name in plans[0].hotspots],
        ("first bottleneck", [p.bottleneck[0] for p in plans]),
        ("... full at mowers", each(lambda p: p.bottleneck[1])),
    ]  # fmt: skip


def render(plans: list[Plan], costs: dict[str, Any]) -> str:
    """A Markdown table, one column per fleet size."""
    head = "| | " + " | ".join(f"{_k(p.mowers)} mowers" for p in plans) + " |"
    lines = [head, "|---" * (len(plans) + 1) + "|"]
    lines += [f"| {name} | " + " | ".join(vals) + " |" for name, vals in _rows(plans, costs)]
    return "\n".join(lines)


def _slug(text: str) -> str:
    return text.replace(" ", "_").replace("'", "")


def result_line(plans: list[Plan]) -> str:
    """The RESULT line: each key's values for the sizes in order."""

    def join(f: Any) -> str:
        return ",".join(str(f(p)) for p in plans)

    return " ".join([
        "RESULT",
        f"mowers={join(lambda p: p.mowers)}",
        f"gateway_shards={join(lambda p: p.units['gateway_shards'])}",
        f"telemetry_replicas={join(lambda p: p.units['telemetry'])}",
        f"notifications_replicas={join(lambda p: p.units['notifications'])}",
        f"realtime_replicas={join(lambda p: p.units['realtime'])}",
        f"fleet_replicas={join(lambda p: p.units['fleet'])}",
        f"nats_nodes={join(lambda p: p.units['nats_nodes'])}",
        f"telemetry_streams={join(lambda p: p.units['telemetry_streams'])}",
        f"cores={join(lambda p: round(p.total_cores, 1))}",
        f"pg_rows_per_s={join(lambda p: round(sum(p.table_rows_per_s.values())))}",
        f"pg_wal_mb_per_s={join(lambda p: round(p.wal_mb_per_s, 2))}",
        f"pg_gb={join(lambda p: round(sum(p.table_gb.values()), 1))}",
        f"bottleneck={join(lambda p: _slug(p.bottleneck[0]))}",
        f"bottleneck_at_mowers={join(lambda p: round(p.bottleneck[1]))}",
    ])  # fmt: skip


def main(sizes: list[int], workload: Workload) -> int:
    """Print the plan for each size."""
    costs = load_costs()
    plans = [plan(n, workload, costs) for n in sizes]
    print(f"costs measured {costs['measured_at']} on {costs['machine']['cpu_model']}"
          f" ({costs['machine']['cpus']} CPUs); workload {workload}")  # fmt: skip
    print(render(plans, costs))
    print(result_line(plans))
    return 0
