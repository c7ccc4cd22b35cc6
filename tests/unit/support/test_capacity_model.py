"""The capacity model's arithmetic, on hand-made costs."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.capacity.measure import gateway_costs
from tests.capacity.model import Limits, Workload, plan, rates


def _costs(*, leader_us: float = 5.0) -> dict[str, Any]:
    table = {"driver": "state", "rows_per_unit": 1.0, "inserted_per_unit": 1.0,
             "wal_bytes_per_unit": 200.0, "bytes_per_live_row": 250.0}  # fmt: skip
    nats = {"cpu_us_per_stored": 15.0, "leader_cpu_us_per_stored": leader_us,
            "cpu_us_per_delivered": 20.0, "leader_cpu_us_per_delivered": leader_us,
            "payload_bytes": 376}  # fmt: skip
    return {
        "gateway": {"cpu_us_per_state": 100.0, "cpu_us_per_command": 300.0},
        "telemetry": {"cpu_us_per_state": 20.0},
        "notifications": {"cpu_us_per_state": 40.0, "delivery_cpu_us": 9.0},
        "nats": {"r1": nats, "r3": nats},
        "postgres": {"tables": {"mower_history": table, "mower_latest": {**table,
                     "rows_per_unit": 0.5, "inserted_per_unit": 0.0}}},
        "realtime": {"cpu_us_per_delivered_event": 30.0},
        "fleet": {"cpu_us_per_command": 400.0},
        "documented": {"fleet_list_us_per_registration": {"value": 12.5}},
    }  # fmt: skip


def test_rates_follow_the_workload() -> None:
    r = rates(1000, Workload(mowing_share=0.5, commands_per_mower_day=8.64, peak_factor=1.0))
    assert r.states_per_s == pytest.approx(1000 * (0.5 * 1.0 + 0.5 * 0.1))
    assert r.commands_per_s == pytest.approx(0.1)


def test_cores_scale_with_the_fleet_and_units_are_whole() -> None:
    small, big = (plan(n, Workload(), _costs()) for n in (10_000, 100_000))
    assert big.cores["gateway"] == pytest.approx(10 * small.cores["gateway"])
    assert big.units["gateway_shards"] == math.ceil(big.cores["gateway"] / Limits().process_cores)
    assert all(isinstance(v, int) and v >= 1 for v in big.units.values())
    assert big.units["nats_nodes"] >= 3


def test_shards_are_bound_by_connections_when_cpu_is_cheap() -> None:
    costs = _costs()
    costs["gateway"] = {"cpu_us_per_state": 0.001, "cpu_us_per_command": 0.001}
    p = plan(100_000, Workload(), costs, Limits(mowers_per_shard=20_000))
    assert p.units["gateway_shards"] == 5


def test_the_bottleneck_is_the_fullest_single_unit() -> None:
    p = plan(100_000, Workload(), _costs(leader_us=50.0))
    name, full_at = p.bottleneck
    assert name == "TELEMETRY leader's node"
    assert full_at == pytest.approx(100_000 / p.hotspots[name])


def test_retained_tables_grow_with_their_days_and_per_mower_tables_with_mowers() -> None:
    p = plan(10_000, Workload(), _costs())
    history_rows_day = rates(10_000, Workload()).states_per_day
    assert p.table_gb["mower_history"] == pytest.approx(history_rows_day * 30 * 250 / 1e9)
    assert p.table_gb["mower_latest"] == pytest.approx(10_000 * 250 / 1e9)


def test_every_shard_pays_for_the_commands_of_the_others() -> None:
    costs = _costs()
    alone = plan(100_000, Workload(), costs)
    costs["gateway"]["cpu_us_per_foreign_command"] = 300.0
    shared = plan(100_000, Workload(), costs)
    shards = shared.units["gateway_shards"]
    extra = shared.rates.commands_per_s * (shards - 1) * 300.0 * 1e-6
    assert shards >= alone.units["gateway_shards"]
    assert shared.cores["gateway"] == pytest.approx(alone.cores["gateway"] + extra)


def test_a_replica_s_own_cpu_is_counted_once_per_replica() -> None:
    costs = _costs()
    costs["telemetry"]["replica_cores"] = 0.1
    p = plan(100_000, Workload(), costs)
    bare = plan(100_000, Workload(), _costs())
    assert p.cores["telemetry"] == pytest.approx(
        bare.cores["telemetry"] + 0.1 * p.units["telemetry"]
    )


def test_a_shard_s_upkeep_is_counted_once_per_shard_and_can_add_a_shard() -> None:
    bare = plan(100_000, Workload(), _costs())
    costs = _costs()
    costs["gateway"]["shard_cores"] = 0.05
    p = plan(100_000, Workload(), costs)
    shards = p.units["gateway_shards"]
    assert shards >= bare.units["gateway_shards"]
    if shards == bare.units["gateway_shards"]:
        assert p.cores["gateway"] == pytest.approx(bare.cores["gateway"] + 0.05 * shards)
    # A shard whose upkeep fills a whole process leaves no room for its share.
    costs["gateway"]["shard_cores"] = Limits().process_cores
    with pytest.raises(ValueError, match="no shard count"):
        plan(100_000, Workload(), costs)


def test_the_gateway_costs_separate_a_shard_s_upkeep_from_its_states() -> None:
    # Made from known costs: 50 us a state, 0.02 cores a shard, 500 us a command, 200 us
    # a command of another shard.
    a, b, c, f = 50e-6, 0.02, 500e-6, 200e-6

    def run(shards: int, states: int, loaded_states: int) -> dict[str, Any]:
        idle = states * a + shards * b * 30.0
        loaded = loaded_states * a + 6000 * (c + (shards - 1) * f) + shards * b * 20.0
        return {"idle_cpu_s": [idle], "idle_s": 30.0, "idle_states": states,
                "loaded_cpu_s": [loaded], "loaded_s": 20.0, "loaded_states": loaded_states,
                "commands": 6000, "mowers": 1000}  # fmt: skip

    got = gateway_costs(run(1, 3000, 2000), run(2, 3100, 2100))
    assert got["cpu_us_per_state"] == pytest.approx(50.0)
    assert got["shard_cores"] == pytest.approx(0.02)
    assert got["cpu_us_per_command"] == pytest.approx(500.0)
    assert got["cpu_us_per_foreign_command"] == pytest.approx(200.0)
