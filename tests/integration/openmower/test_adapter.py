"""The gateway's ``openmower`` connection against a stand-in OpenMower on a real Mosquitto."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from contracts.v1 import (
    Connection,
    EmergencyStop,
    ManualDrive,
    MowerRegistration,
    PauseMow,
    ResumeMow,
    ReturnToDock,
    SetBladeHeight,
    StartMow,
)
from mowdeck.devices.endpoints import DeviceHosts
from mowdeck.gateway.connections import (
    CommandOutcome,
    ConnectionAdapters,
    ConnectionDeps,
    LinkDownError,
)
from mowdeck.gateway.connections.credentials import Credentials
from mowdeck.gateway.connections.openmower import OpenMowerConnection
from simulator.openmower import ACTION_PAUSE, ACTION_START, StandInOpenMower
from tests.support.eventually import eventually
from tests.support.links import HOSTS, Recorder, envelope
from tests.support.mosquitto import Mosquitto, running_mosquitto

ACCOUNT = uuid.UUID("00000000-0000-4000-8000-00000000acc1")
DATUM = {"lat": 48.1, "lon": 11.5}


def registration(broker: Mosquitto, **options: Any) -> MowerRegistration:
    values = {"broker": broker.url, "prefix": "yard/om1", "datum": DATUM, **options}
    return MowerRegistration(
        mower_id=uuid.uuid4(),
        account_id=ACCOUNT,
        name="om1",
        connection=Connection(kind="openmower", options=values),
    )


async def opened(
    reg: MowerRegistration, deps: ConnectionDeps | None = None
) -> tuple[OpenMowerConnection, Recorder]:
    rec = Recorder()
    factory = ConnectionAdapters.from_entry_points().factory("openmower")
    conn = factory(reg, rec, deps=deps or ConnectionDeps(HOSTS))
    assert isinstance(conn, OpenMowerConnection)
    await conn.open()
    return conn, rec


@pytest.fixture
async def link(
    broker: Mosquitto, openmower: StandInOpenMower
) -> AsyncIterator[tuple[OpenMowerConnection, Recorder, MowerRegistration]]:
    reg = registration(broker)
    conn, rec = await opened(reg)
    await eventually(lambda: conn.connected and conn.actions is not None)
    yield conn, rec, reg
    await conn.close()


async def test_states_arrive_mapped_with_the_link_up(
    link: tuple[OpenMowerConnection, Recorder, MowerRegistration],
) -> None:
    _conn, rec, reg = link
    await eventually(lambda: len(rec.states) >= 3)
    state = rec.states[-1]
    assert rec.links[0] == (True, None)
    assert state.mower_id == reg.mower_id
    assert state.activity == "charging"  # IDLE on the dock, charging
    assert state.charging is True
    assert 80 <= state.battery <= 100
    assert state.rtk_fix == "fixed"
    assert state.position is not None
    assert state.position.lat == pytest.approx(48.1, abs=1e-4)
    assert state.raw["openmower.current_state"] == "IDLE"
    assert state.raw["openmower.rain_detected"] is False


async def test_start_pause_continue_dock_each_confirmed_by_the_next_states(
    link: tuple[OpenMowerConnection, Recorder, MowerRegistration], openmower: StandInOpenMower
) -> None:
    conn, rec, reg = link
    started = await conn.send(envelope(reg, StartMow()), timeout=5)
    assert started == CommandOutcome("executed", None)
    assert list(openmower.actions_received) == [ACTION_START]
    await eventually(lambda: conn.actions is not None and conn.actions.get(ACTION_PAUSE))
    assert (await conn.send(envelope(reg, PauseMow()), timeout=5)).status == "executed"
    assert openmower.state == "PAUSED"
    await eventually(lambda: conn.actions is not None and conn.actions.get(ACTION_PAUSE) is False)
    assert (await conn.send(envelope(reg, ResumeMow()), timeout=5)).status == "executed"
    await eventually(lambda: conn.actions is not None and conn.actions.get(ACTION_PAUSE))
    assert (await conn.send(envelope(reg, ReturnToDock()), timeout=5)).status == "executed"
    await eventually(lambda: rec.states[-1].activity == "charging", 5)


async def test_an_action_not_enabled_fails_without_being_sent(
    link: tuple[OpenMowerConnection, Recorder, MowerRegistration], openmower: StandInOpenMower
) -> None:
    conn, _, reg = link
    outcome = await conn.send(envelope(reg, PauseMow()), timeout=5)
    assert outcome.status == "failed"
    assert "mower_logic:mowing/pause is not enabled" in (outcome.reason or "")
    assert "state IDLE" in (outcome.reason or "")
    assert list(openmower.actions_received) == []


async def test_kinds_openmower_cannot_do_are_rejected_naming_kind_and_protocol(
    link: tuple[OpenMowerConnection, Recorder, MowerRegistration], openmower: StandInOpenMower
) -> None:
    conn, _, reg = link
    outcome = await conn.send(envelope(reg, SetBladeHeight(height_mm=40)), timeout=5)
    assert outcome.status == "rejected"
    assert "set_blade_height" in (outcome.reason or "")
    assert "OpenMower" in (outcome.reason or "")
    assert list(openmower.actions_received) == []


async def test_an_ignored_action_fails_with_the_state_the_mower_kept(
    link: tuple[OpenMowerConnection, Recorder, MowerRegistration], openmower: StandInOpenMower
) -> None:
    conn, _, reg = link
    openmower.deaf = True
    outcome = await conn.send(envelope(reg, StartMow()), timeout=0.5)
    assert outcome.status == "failed"
    assert "still reports IDLE" in (outcome.reason or "")
    assert list(openmower.actions_received) == [ACTION_START]


async def test_a_repeated_command_id_gets_its_first_outcome_and_no_second_action(
    link: tuple[OpenMowerConnection, Recorder, MowerRegistration], openmower: StandInOpenMower
) -> None:
    conn, _, reg = link
    start = envelope(reg, StartMow())
    first = await conn.send(start, timeout=5)
    again = await conn.send(start, timeout=5)
    assert first == again
    assert first.status == "executed"
    assert list(openmower.actions_received) == [ACTION_START]


async def test_emergency_stop_is_a_pause_executed_once_the_mower_reports_it_stopped(
    link: tuple[OpenMowerConnection, Recorder, MowerRegistration], openmower: StandInOpenMower
) -> None:
    conn, _, reg = link
    await conn.send(envelope(reg, StartMow()), timeout=5)
    await eventually(
        lambda: (
            openmower.state == "MOWING"
            and conn.actions is not None
            and conn.actions.get(ACTION_PAUSE)
        )
    )
    outcome = await conn.send(envelope(reg, EmergencyStop(reason="child")), timeout=5)
    assert outcome == CommandOutcome("executed", None)
    assert openmower.actions_received[-1] == ACTION_PAUSE
    assert openmower.teleops[-1] == (0.0, 0.0)  # and any held drive is zeroed first
    assert openmower.state == "PAUSED"


async def test_emergency_stop_that_the_mower_does_not_carry_out_is_not_executed(
    link: tuple[OpenMowerConnection, Recorder, MowerRegistration], openmower: StandInOpenMower
) -> None:
    conn, _, reg = link
    await conn.send(envelope(reg, StartMow()), timeout=5)
    await eventually(
        lambda: (
            openmower.state == "MOWING"
            and conn.actions is not None
            and conn.actions.get(ACTION_PAUSE)
        )
    )
    openmower.deaf = True
    outcome = await conn.send(envelope(reg, EmergencyStop()), timeout=0.5)
    assert outcome.status == "failed"
    assert "still reports MOWING" in (outcome.reason or "")


async def test_manual_drive_holds_the_velocity_for_its_ttl_then_sends_zero(
    link: tuple[OpenMowerConnection, Recorder, MowerRegistration], openmower: StandInOpenMower
) -> None:
    conn, _, reg = link
    outcome = await conn.send(
        envelope(reg, ManualDrive(linear_mps=0.4, angular_rps=0.5, ttl_ms=500)), timeout=5
    )
    assert outcome.status == "executed"
    await eventually(lambda: openmower.teleops and openmower.teleops[-1] == (0.0, 0.0), 3)
    held = [t for t in openmower.teleops if t == (0.4, 0.5)]
    assert len(held) >= 2  # repeated while the ttl ran
    assert (openmower.vx, openmower.vz) == (0.0, 0.0)


async def test_the_link_goes_down_when_robot_state_goes_stale_and_up_when_it_resumes(
    broker: Mosquitto, openmower: StandInOpenMower
) -> None:
    reg = registration(broker, stale_seconds=1)
    conn, rec = await opened(reg)
    try:
        await eventually(lambda: conn.connected)
        openmower.silent = True
        await eventually(lambda: not conn.connected, 5)
        assert rec.links[-1][0] is False
        assert "no robot_state for 1 s" in (rec.links[-1][1] or "")
        with pytest.raises(LinkDownError):
            await conn.send(envelope(reg, StartMow()), timeout=1)
        openmower.silent = False
        await eventually(lambda: conn.connected, 5)
        assert rec.links[-1] == (True, None)
    finally:
        await conn.close()


async def test_a_broker_the_device_hosts_do_not_allow_is_never_dialled(
    broker: Mosquitto, openmower: StandInOpenMower
) -> None:
    reg = registration(broker)
    conn, rec = await opened(reg, ConnectionDeps(DeviceHosts(["10.0.0.0/8"])))
    try:
        await eventually(lambda: conn.reason is not None)
        await asyncio.sleep(0.3)
        assert not conn.connected
        assert rec.links == []
        assert "MOWDECK_GATEWAY_DEVICE_HOSTS does not allow" in (conn.reason or "")
    finally:
        await conn.close()


async def test_a_missing_credential_keeps_the_link_down_with_a_clear_reason(
    broker: Mosquitto, openmower: StandInOpenMower, tmp_path: Path
) -> None:
    reg = registration(broker, credentials="yard")
    conn, _rec = await opened(reg, ConnectionDeps(HOSTS, Credentials(tmp_path)))
    try:
        await eventually(lambda: conn.reason is not None)
        assert not conn.connected
        assert f"credential 'yard': {tmp_path / 'yard.json'} does not exist" == conn.reason
    finally:
        await conn.close()


async def test_a_broker_with_logins_is_reached_with_the_named_credential(
    tmp_path: Path,
) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "yard.json").write_text(
        json.dumps({"username": "mowdeck", "password": "s3cret"})
    )
    (tmp_path / "secrets" / "wrong.json").write_text(
        json.dumps({"username": "mowdeck", "password": "nope"})
    )
    (tmp_path / "broker").mkdir()
    async with running_mosquitto(tmp_path / "broker", {"mowdeck": "s3cret"}) as broker:
        standin = StandInOpenMower("127.0.0.1", broker.port, prefix="yard/om1/", period=0.05)
        standin.login = ("mowdeck", "s3cret")
        await standin.start()
        deps = ConnectionDeps(HOSTS, Credentials(tmp_path / "secrets"))
        good, _ = await opened(registration(broker, credentials="yard"), deps)
        bad, _ = await opened(registration(broker, credentials="wrong", prefix="other"), deps)
        try:
            await eventually(lambda: good.connected)
            await eventually(lambda: bad.reason is not None)
            assert not bad.connected
            assert "Not authorized" in (bad.reason or ""), bad.reason
        finally:
            await good.close()
            await bad.close()
            await standin.stop()


def mowing_offered(conn: OpenMowerConnection) -> bool:
    """The link has seen mower_logic offer its mowing actions."""
    return conn.actions is not None and bool(conn.actions.get(ACTION_PAUSE))


async def test_a_held_drive_ends_with_zero_when_the_mower_goes_silent(
    broker: Mosquitto, openmower: StandInOpenMower
) -> None:
    reg = registration(broker, stale_seconds=1)
    conn, _ = await opened(reg)
    try:
        await eventually(lambda: conn.connected)
        drive = ManualDrive(linear_mps=0.3, angular_rps=0.0, ttl_ms=2000)
        assert (await conn.send(envelope(reg, drive), timeout=5)).status == "executed"
        openmower.silent = True
        await eventually(lambda: not conn.connected, 5)
        await eventually(lambda: openmower.teleops[-1] == (0.0, 0.0), 2)
        assert (openmower.vx, openmower.vz) == (0.0, 0.0)
    finally:
        await conn.close()


async def test_the_same_command_sent_twice_at_once_is_carried_out_once(
    link: tuple[OpenMowerConnection, Recorder, MowerRegistration], openmower: StandInOpenMower
) -> None:
    conn, _, reg = link
    drive = envelope(reg, ManualDrive(linear_mps=0.2, angular_rps=0.0, ttl_ms=100))
    start = envelope(reg, StartMow())
    outcomes = await asyncio.gather(
        conn.send(start, timeout=5), conn.send(start, timeout=5),
        conn.send(drive, timeout=1), conn.send(drive, timeout=1),
    )  # fmt: skip
    assert [o.status for o in outcomes] == ["executed"] * 4
    assert list(openmower.actions_received) == [ACTION_START]
