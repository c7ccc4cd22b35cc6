"""The virtual mower's faults and reports, and the fleet's seeded reproducibility."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from contracts.v1 import StartMow, decode_state, encode
from simulator import model
from simulator.faults import (
    BatteryFault,
    ErrorFault,
    FaultError,
    LatencyFault,
    LinkLossFault,
    RejectFault,
    SilenceFault,
    StuckFault,
    decode_fault,
)
from simulator.fleet import FleetConfig, SimulatorFleet
from simulator.garden import Garden
from simulator.model import VirtualMower
from simulator.physics import Body, Params

AT = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def mower(seed: int = 7) -> VirtualMower:
    garden = Garden(base_lat=48.1, base_lon=11.5, width=30.0, depth=20.0)
    return VirtualMower(
        mower_id=uuid.UUID(int=1, version=4),
        account_id=uuid.UUID(int=2, version=4),
        name="m1",
        garden=garden,
        params=Params(),
        body=Body(x=garden.dock_x, y=garden.dock_y),
        seed=seed,
        now=0.0,
    )


def test_state_is_a_valid_contract_state() -> None:
    m = mower()
    state = decode_state(encode(m.state(AT)))
    assert state.activity == "docked"
    assert state.battery == 100
    assert state.position is not None
    assert state.position.heading_deg is not None


@pytest.mark.parametrize(
    ("fault", "check"),
    [
        (ErrorFault(code="lifted"), lambda m: m.body.error_code == "lifted"),
        (BatteryFault(level=12.0), lambda m: m.body.battery == 12.0),
        (StuckFault(), lambda m: m.body.stuck),
        (LatencyFault(ms=250), lambda m: m.transport.latency_ms == 250),
        (RejectFault(), lambda m: m.transport.reject),
        (SilenceFault(seconds=5), lambda m: m.transport.silent_until == 105.0),
        (LinkLossFault(seconds=3), lambda m: m.transport.link_down_until == 103.0),
    ],
    ids=["error", "battery", "stuck", "latency", "reject", "silence", "link-loss"],
)
def test_fault_is_applied_listed_and_cleared(fault: object, check: object) -> None:
    m = mower()
    m.inject(fault, now=1.0, wall=100.0)  # type: ignore[arg-type]
    assert check(m)  # type: ignore[operator]
    # The battery level is a one-off jump, not a standing fault.
    assert bool(m.faults(100.0)) is not isinstance(fault, BatteryFault)
    m.clear_faults(now=2.0)
    assert m.faults(100.0) == {}
    assert m.body.activity != "error"


def test_error_fault_refuses_moving_commands_until_cleared() -> None:
    m = mower()
    m.inject(ErrorFault(code="lifted"), now=0.0, wall=0.0)
    assert m.execute(StartMow(), 1.0) is not None
    m.clear_faults(2.0)
    assert m.execute(StartMow(), 3.0) is None


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'{"kind": "melt"}', "melt"),
        (b'{"kind": "battery", "level": 150}', "level"),
        (b'{"kind": "latency"}', "ms"),
        (b"nope", "JSON"),
    ],
    ids=["unknown-kind", "out-of-range", "missing-field", "not-json"],
)
def test_invalid_fault_requests_say_why(body: bytes, reason: str) -> None:
    with pytest.raises(FaultError, match=reason):
        decode_fault(body)


def test_rtk_changes_over_time_and_repeats_with_the_seed() -> None:
    def fixes(seed: int) -> list[str]:
        m, seen = mower(seed), []
        for t in range(1, 3000):
            m.advance(float(t * 10))
            seen.append(m.rtk_fix)
        return seen

    assert fixes(3) == fixes(3)
    assert {"fixed", "float"} <= set(fixes(3))


def test_same_seed_same_fleet_different_seed_different_fleet() -> None:
    def ids(seed: int) -> list[uuid.UUID]:
        return [m.mower_id for m in SimulatorFleet(FleetConfig(mowers=5, seed=seed)).mowers]

    assert ids(1) == ids(1)
    assert ids(1) != ids(2)
    fleet = SimulatorFleet(FleetConfig(mowers=5, seed=1))
    assert all(m.mower_id.version == 4 for m in fleet.mowers)
    assert len({m.account_id for m in fleet.mowers}) == 1


def test_a_command_is_found_by_id_long_after_it_left_the_log() -> None:
    # A gateway that crashed resends the commands it held, maybe hundreds of commands
    # later on a busy mower: each must still be answered with its first outcome.
    m = mower()
    assert m.find(uuid.UUID(int=1)) is None  # no command yet
    ids = [uuid.UUID(int=1000 + i) for i in range(150)]
    records = [m.record(i, StartMow(), AT) for i in ids]
    assert m.commands is not None and len(m.commands) == 100  # the log keeps the last 100
    assert [m.find(i) for i in ids] == records  # the ids are remembered beyond it
    # An id recorded again (an undecodable repeat): the latest record is the one found.
    again = m.record(ids[60], None, AT)
    assert m.find(ids[60]) is again
    records[60].frames += 1
    assert m.frames()[ids[60]] == 1  # the frames of the record found
    more = [uuid.UUID(int=10_000 + n) for n in range(model._REMEMBER)]
    for i in more:
        m.record(i, StartMow(), AT)
    assert m.find(ids[0]) is None  # at most _REMEMBER ids
    assert m.find(more[-1]) is not None
    assert len(m.frames()) == model._REMEMBER
