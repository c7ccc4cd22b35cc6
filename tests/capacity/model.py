"""The capacity model (pure): a fleet's message rates, and what they need.

Every cost comes from ``costs.json`` (``measure.py``); every assumption about how mowers
and people behave is a field of ``Workload``, and every planning limit a field of
``Limits``, each with its reason. ``plan`` does no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from tests.capacity.tables import table_load
from tests.capacity.workload import Rates, Workload, rates

__all__ = ["Limits", "Plan", "Rates", "Workload", "plan", "rates"]


@dataclass(frozen=True)
class Limits:
    """What one unit of each resource is planned to carry."""

    # A Python service's interpreter saturates at about 0.8 of a core
    # (docs/performance.md); plan 0.5 so that the busiest hour leaves 40 % for bursts
    # and recovery (a replica's restart hands its share to the others).
    process_cores: float = 0.5
    # The gateway's memory: 10,000 connected mowers in 300 MB (gateway benchmark);
    # 20,000 per shard keeps a shard under 1 GB and its restart's reconnect storm short.
    mowers_per_shard: int = 20_000
    # A NATS node of 4 cores planned to 60 %.
    nats_node_cores: float = 2.4
    # One stream's writes are ordered by its leader (one Raft group, one goroutine taking
    # them in): at most one core for a stream's stores, whatever the cluster's size.
    stream_ingest_cores: float = 1.0
    # PostgreSQL: batched upserts and inserts reach about 100k rows/s on one connection
    # on this machine (FINDINGS: unnest upsert 106k rows/s): plan 50k rows/s a core.
    pg_rows_per_core: float = 50_000.0
    # One table's writes contend for its indexes' pages and the WAL insertion: plan
    # 50k rows/s per table before it is partitioned.
    table_rows_per_s: float = 50_000.0
    # Fleet answers a shard's ``fleet.mowers.list`` pages at start; every shard starting
    # at once (a new version rolled out) should be served within a minute.
    fleet_list_s: float = 60.0


@dataclass(frozen=True)
class Plan:
    """What a fleet needs."""

    mowers: int
    rates: Rates
    cores: dict[str, float]  # by component, at the busiest hour
    units: dict[str, int]  # shards, replicas, nodes
    table_rows_per_s: dict[str, float]
    wal_mb_per_s: float
    table_gb: dict[str, float]
    # Single units that cannot be scaled by adding replicas: their use (1.0 = full).
    hotspots: dict[str, float] = field(default_factory=dict)

    @property
    def total_cores(self) -> float:
        """Every component's cores, PostgreSQL included."""
        return sum(self.cores.values())

    @property
    def bottleneck(self) -> tuple[str, float]:
        """The single unit closest to full, and the fleet size at which it is full."""
        name, use = max(self.hotspots.items(), key=lambda kv: kv[1])
        return name, self.mowers / use if use else math.inf


def gateway_shards(mowers: int, r: Rates, gw: dict[str, float], lim: Limits) -> int:
    """Shards enough for the connections and for the CPU, each shard also paying for the
    other shards' commands it receives and acknowledges."""
    foreign = gw.get("cpu_us_per_foreign_command", 0.0) * 1e-6
    upkeep = gw.get("shard_cores", 0.0)
    own = r.states_per_s * gw["cpu_us_per_state"] + r.commands_per_s * gw["cpu_us_per_command"]
    shards = max(1, math.ceil(mowers / lim.mowers_per_shard))
    # Each shard: its share of the fleet, plus every command it does not own, plus its
    # own upkeep.
    while own * 1e-6 / shards + r.commands_per_s * foreign + upkeep > lim.process_cores:
        shards += 1
        if shards > 100_000:
            raise ValueError("the commands alone fill a shard: no shard count suffices")
    return shards


def _hotspots(
    r: Rates,
    w: Workload,
    costs: dict[str, Any],
    *,
    mowers: int,
    rows: dict[str, float],
    lim: Limits,
) -> dict[str, float]:
    """The single units no replica can share, and how full each is (1.0: full)."""
    r3 = costs["nats"]["r3"]
    doc = {k: v["value"] for k, v in costs["documented"].items()}
    us = 1e-6
    # The leader's node also delivers to every consumer of the stream (goroutines of
    # their own, on the same node's cores).
    fan_out = w.state_consumers * r3["leader_cpu_us_per_delivered"]
    ingest = r.states_per_s * r3["leader_cpu_us_per_stored"] * us
    leader_node = r.states_per_s * (r3["leader_cpu_us_per_stored"] + fan_out) * us
    hot_table = max(rows, key=lambda t: rows[t])
    results = (
        r.results_per_s
        * (r3["leader_cpu_us_per_stored"] + 3 * r3["leader_cpu_us_per_delivered"])
        * us
    )
    return {
        "TELEMETRY leader's node": leader_node / lim.nats_node_cores,
        "TELEMETRY stream's ingest": ingest / lim.stream_ingest_cores,
        f"table {hot_table}": rows[hot_table] / lim.table_rows_per_s,
        # Results share the COMMANDS stream with the commands: its leader's node.
        "results on the COMMANDS leader's node": results / lim.nats_node_cores,
        "Fleet's registry list at a full restart": mowers * doc["fleet_list_us_per_registration"]
        * us / lim.fleet_list_s,
    }  # fmt: skip


def plan(mowers: int, w: Workload, costs: dict[str, Any], lim: Limits | None = None) -> Plan:
    """What ``mowers`` mowers need at their busiest hour."""
    lim = lim or Limits()
    r = rates(mowers, w)
    gw, nats = costs["gateway"], costs["nats"]
    us = 1e-6
    telemetry_us = costs["telemetry"]["cpu_us_per_state"]
    cores = {
        "gateway": (r.states_per_s * gw["cpu_us_per_state"]
                    + r.commands_per_s * gw["cpu_us_per_command"]) * us,
        "telemetry": (r.states_per_s + r.results_per_s) * telemetry_us * us,
        "notifications": r.states_per_s * costs["notifications"]["cpu_us_per_state"] * us,
        "realtime": (r.realtime_events_per_s * costs["realtime"]["cpu_us_per_delivered_event"]
                     + r.states_per_s * costs["notifications"]["delivery_cpu_us"]) * us,
        "fleet": r.commands_per_s * costs["fleet"]["cpu_us_per_command"] * us,
    }  # fmt: skip
    stored = r.states_per_s + r.commands_per_s + r.results_per_s
    delivered = r.states_per_s * w.state_consumers + r.commands_per_s + r.results_per_s * 3
    r3 = nats["r3"]
    cores["nats"] = (stored * r3["cpu_us_per_stored"] + delivered * r3["cpu_us_per_delivered"]) * us
    rows, wal_mb, size = table_load(r, costs["postgres"], mowers)
    cores["postgresql"] = sum(rows.values()) / lim.pg_rows_per_core
    units = {
        name: max(1 if name != "fleet" else 2, math.ceil(c / lim.process_cores))
        for name, c in cores.items()
        if name not in ("nats", "postgresql", "gateway")
    }
    # A replica's own CPU beyond its states (smaller batches each): more replicas.
    replica = costs["telemetry"].get("replica_cores", 0.0)
    units["telemetry"] = max(1, math.ceil(cores["telemetry"] / (lim.process_cores - replica)))
    cores["telemetry"] += units["telemetry"] * replica
    units["gateway_shards"] = gateway_shards(mowers, r, gw, lim)
    # Every shard receives every command and acknowledges the others' (ADR 0013).
    foreign = gw.get("cpu_us_per_foreign_command", 0.0)
    cores["gateway"] += r.commands_per_s * (units["gateway_shards"] - 1) * foreign * us
    cores["gateway"] += units["gateway_shards"] * gw.get("shard_cores", 0.0)
    units["nats_nodes"] = max(3, math.ceil(cores["nats"] / lim.nats_node_cores))
    hotspots = _hotspots(r, w, costs, mowers=mowers, rows=rows, lim=lim)
    # Beyond one leader's node: the states split over streams by a partition of the
    # mower ids (subject mapping), each with a leader of its own.
    units["telemetry_streams"] = max(1, math.ceil(hotspots["TELEMETRY leader's node"]))
    return Plan(mowers, r, cores, units, rows, wal_mb, size, hotspots)
