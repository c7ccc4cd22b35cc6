"""The capacity model (pure): a fleet's message rates, and what they need.

Every cost comes from ``costs.json`` (``measure.py``); every assumption about how mowers
and people behave is a field of ``Workload``, and every planning limit a field of
``Limits``, each with its reason. ``plan`` does no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Limits", "Plan", "Rates", "Workload", "plan", "rates"]

DAY = 86_400.0


@dataclass(frozen=True)
class Workload:
    """How a fleet behaves at its busiest hour, and over a day (for table sizes)."""

    heartbeat_s: float = 10.0  # an idle mower's periodic state (the figure)
    changes_per_s_mowing: float = 1.0  # a mowing mower's states (the figure)
    # Mowers mow in daylight: a mower that mows 4 h a day within a 10 h window has a
    # 40 % chance of mowing at any daytime moment; a fleet's schedules cluster in the
    # morning, so the busiest hour has about half of them out.
    mowing_share: float = 0.5
    mowing_hours_per_day: float = 4.0
    # Commands: a start, a dock and a pause or resume a day from the schedules (issued
    # as ordinary commands), plus about three from people (settings, manual starts).
    commands_per_mower_day: float = 6.0
    # Notifications: finished, battery low, stuck or offline: about three a mower a day
    # in the season; each reaches two people on average (owner and operator).
    notifications_per_mower_day: float = 3.0
    recipients_per_notification: float = 2.0
    # The busiest hour carries this many times the day's mean of commands and
    # notifications (schedules start together; jobs end together).
    peak_factor: float = 3.0
    # Live views: at the busiest hour one mower in twenty is watched, by two clients
    # on average (the console of an operator, a phone); every state of it is an event.
    watched_share: float = 0.05
    clients_per_watched: float = 2.0
    # Final and intermediate results per command (accepted, sent, executed): measured in
    # the soak as Fleet's statuses per command (``fleet_command_statuses``).
    results_per_command: float = 1.6
    # The consumers of every state: Telemetry, Notifications and Realtime.
    state_consumers: int = 3


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


# Days each growing table keeps (docs/telemetry.md, docs/fleet.md, docs/notifications.md);
# a table not named here holds one row per mower (or per user), whatever the time.
RETENTION_DAYS = {
    "mower_history": 30,
    "mower_positions": 90,
    "command_timeline": 30,
    "fleet_commands": 7,
    "fleet_command_statuses": 7,
    "fleet_audit_commands": 400,
    "fleet_audit_statuses": 400,
    "notification_deliveries": 7,
    "notification_alarms": 90,
}
PER_MOWER = ("mower_latest", "mower_directory", "notification_watches", "fleet_mowers")


@dataclass(frozen=True)
class Rates:
    """Messages per second at the busiest hour, and per day."""

    states_per_s: float
    commands_per_s: float
    results_per_s: float
    notifications_per_s: float
    realtime_events_per_s: float
    states_per_day: float
    commands_per_day: float
    notifications_per_day: float


def rates(mowers: int, w: Workload) -> Rates:
    """The fleet's rates."""
    idle = 1.0 / w.heartbeat_s
    per_mower = w.mowing_share * w.changes_per_s_mowing + (1 - w.mowing_share) * idle
    mowing_s = w.mowing_hours_per_day * 3600
    states_day = mowers * (mowing_s * w.changes_per_s_mowing + (DAY - mowing_s) * idle)
    commands_day = mowers * w.commands_per_mower_day
    notes_day = mowers * w.notifications_per_mower_day * w.recipients_per_notification
    states = mowers * per_mower
    commands = commands_day / DAY * w.peak_factor
    return Rates(
        states_per_s=states,
        commands_per_s=commands,
        results_per_s=commands * w.results_per_command,
        notifications_per_s=notes_day / DAY * w.peak_factor,
        realtime_events_per_s=states * w.watched_share * w.clients_per_watched,
        states_per_day=states_day,
        commands_per_day=commands_day,
        notifications_per_day=notes_day,
    )


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


def _tables(
    r: Rates, pg: dict[str, Any], mowers: int
) -> tuple[dict[str, float], float, dict[str, float]]:
    per_s = {"state": r.states_per_s, "command": r.commands_per_s,
             "notification": r.notifications_per_s}  # fmt: skip
    per_day = {"state": r.states_per_day, "command": r.commands_per_day,
               "notification": r.notifications_per_day}  # fmt: skip
    rows, wal, size = {}, 0.0, {}
    for name, t in pg["tables"].items():
        units = per_s[t["driver"]]
        if t["rows_per_unit"] > 0:
            rows[name] = units * t["rows_per_unit"]
        wal += units * t["wal_bytes_per_unit"]
        # Small tables' pages hold few rows: take the WAL of an insert as the row's size.
        inserted = t.get("inserted_per_unit", 0.0)
        row_bytes = t["bytes_per_live_row"]
        if (row_bytes > 4000 or row_bytes == 0) and inserted:
            row_bytes = t["wal_bytes_per_unit"] / inserted
        if name in RETENTION_DAYS:
            size[name] = per_day[t["driver"]] * inserted * RETENTION_DAYS[name] * row_bytes / 1e9
        elif name in PER_MOWER:
            size[name] = mowers * row_bytes / 1e9
    return rows, wal / 1e6, size


def gateway_shards(mowers: int, r: Rates, gw: dict[str, float], lim: Limits) -> int:
    """Shards enough for the connections and for the CPU, each shard also paying for the
    other shards' commands it receives and acknowledges."""
    foreign = gw.get("cpu_us_per_foreign_command", 0.0) * 1e-6
    own = r.states_per_s * gw["cpu_us_per_state"] + r.commands_per_s * gw["cpu_us_per_command"]
    shards = max(1, math.ceil(mowers / lim.mowers_per_shard))
    # Each shard: its share of the fleet, plus every command it does not own.
    while own * 1e-6 / shards + r.commands_per_s * foreign > lim.process_cores:
        shards += 1
        if shards > 100_000:
            raise ValueError("the commands alone fill a shard: no shard count suffices")
    return shards


def plan(mowers: int, w: Workload, costs: dict[str, Any], lim: Limits | None = None) -> Plan:
    """What ``mowers`` mowers need at their busiest hour."""
    lim = lim or Limits()
    r = rates(mowers, w)
    gw, nats = costs["gateway"], costs["nats"]
    doc = {k: v["value"] for k, v in costs["documented"].items()}
    us = 1e-6
    telemetry_us = costs["telemetry"]["cpu_us_per_state"]
    cores = {
        "gateway": (r.states_per_s * gw["cpu_us_per_state"]
                    + r.commands_per_s * gw["cpu_us_per_command"]) * us,
        "telemetry": (r.states_per_s + r.results_per_s) * telemetry_us * us,
        "notifications": r.states_per_s * costs["notifications"]["cpu_us_per_state"] * us,
        "realtime": (r.realtime_events_per_s * doc["realtime_cpu_us_per_delivered_event"]
                     + r.states_per_s * costs["notifications"]["delivery_cpu_us"]) * us,
        "fleet": r.commands_per_s * doc["fleet_cpu_us_per_command"] * us,
    }  # fmt: skip
    stored = r.states_per_s + r.commands_per_s + r.results_per_s
    delivered = r.states_per_s * w.state_consumers + r.commands_per_s + r.results_per_s * 3
    r3 = nats["r3"]
    cores["nats"] = (stored * r3["cpu_us_per_stored"] + delivered * r3["cpu_us_per_delivered"]) * us
    rows, wal_mb, size = _tables(r, costs["postgres"], mowers)
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
    units["nats_nodes"] = max(3, math.ceil(cores["nats"] / lim.nats_node_cores))
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
    hotspots = {
        "TELEMETRY leader's node": leader_node / lim.nats_node_cores,
        "TELEMETRY stream's ingest": ingest / lim.stream_ingest_cores,
        f"table {hot_table}": rows[hot_table] / lim.table_rows_per_s,
        # Results share the COMMANDS stream with the commands: its leader's node.
        "results on the COMMANDS leader's node": results / lim.nats_node_cores,
        "Fleet's registry list at a full restart": mowers * doc["fleet_list_us_per_registration"]
        * us / lim.fleet_list_s,
    }  # fmt: skip
    # Beyond one leader's node: the states split over streams by a partition of the
    # mower ids (subject mapping), each with a leader of its own.
    units["telemetry_streams"] = max(1, math.ceil(hotspots["TELEMETRY leader's node"]))
    return Plan(mowers, r, cores, units, rows, wal_mb, size, hotspots)
