"""The device protocol over real WebSockets: commands, outcomes, bad frames, faults."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest

from simulator import (
    BatteryFault,
    LatencyFault,
    LinkLossFault,
    RejectFault,
    SilenceFault,
    SimulatorServer,
)
from simulator.protocol import ErrorFrame, Hello, OutcomeFrame, StateFrame
from tests.integration.simulator.conftest import DeviceClient
from tests.support.eventually import eventually

Connect = Callable[[uuid.UUID], Any]


def outcome(client: DeviceClient, cid: uuid.UUID) -> OutcomeFrame | None:
    return next((f for f in client.of(OutcomeFrame) if f.command_id == cid), None)


async def answered(client: DeviceClient, cid: uuid.UUID, timeout: float = 5.0) -> OutcomeFrame:
    await eventually(lambda: outcome(client, cid) is not None, timeout)
    found = outcome(client, cid)
    assert found is not None
    return found


def first_id(sim: SimulatorServer) -> uuid.UUID:
    return sim.fleet.mowers[0].mower_id


async def test_hello_then_state_then_periodic_states(
    sim: SimulatorServer, connect: Connect
) -> None:
    mower_id = first_id(sim)
    client = await connect(mower_id)
    await eventually(lambda: len(client.of(StateFrame)) >= 5)
    assert isinstance(client.frames[0], Hello)
    assert client.frames[0].mower_id == mower_id
    state = client.of(StateFrame)[0].state
    assert (state.mower_id, state.account_id) == (mower_id, sim.fleet.account_id)


# (preamble, command kind, fields, expected activity after)
KINDS: list[tuple[str, list[tuple[str, dict[str, Any]]], str, dict[str, Any], set[str]]] = [
    ("start_mow", [], "start_mow", {"duration_min": 30}, {"leaving", "charging", "mowing"}),
    ("pause_mow", [("start_mow", {"duration_min": 5})], "pause_mow", {}, {"paused"}),
    (
        "resume_mow",
        [("start_mow", {}), ("pause_mow", {})],
        "resume_mow",
        {},
        {"leaving", "mowing", "charging"},
    ),
    (
        "return_to_dock",
        [("start_mow", {})],
        "return_to_dock",
        {},
        {"returning", "charging", "docked"},
    ),
    ("emergency_stop", [("start_mow", {})], "emergency_stop", {"reason": "test"}, {"stopped"}),
    ("set_blade_height", [], "set_blade_height", {"height_mm": 65}, {"docked", "charging"}),
    ("set_speed", [], "set_speed", {"speed_mps": 1.1}, {"docked", "charging"}),
    (
        "manual_drive",
        [],
        "manual_drive",
        {"linear_mps": 0.2, "angular_rps": 0, "ttl_ms": 2000},
        {"manual"},
    ),
]


@pytest.mark.parametrize(
    ("preamble", "kind", "fields", "activities"), [k[1:] for k in KINDS], ids=[k[0] for k in KINDS]
)
async def test_every_command_kind_is_executed(  # noqa: PLR0917 - fixtures plus a table row
    sim: SimulatorServer,
    connect: Connect,
    preamble: list[tuple[str, dict[str, Any]]],
    kind: str,
    fields: dict[str, Any],
    activities: set[str],
) -> None:
    mower_id = first_id(sim)
    await sim.inject(mower_id, BatteryFault(level=100))  # full: a start leaves at once
    client = await connect(mower_id)
    for pre_kind, pre_fields in preamble:
        pre = await answered(client, await client.command(pre_kind, **pre_fields))
        assert pre.status == "executed", pre.reason
    cid = await client.command(kind, **fields)
    result = await answered(client, cid)
    assert (result.status, result.reason) == ("executed", None)
    # The state sent right after the outcome shows the effect.
    await eventually(lambda: client.of(StateFrame)[-1].state.activity in activities)
    state = client.of(StateFrame)[-1].state
    if kind == "set_blade_height":
        assert state.blade_height_mm == 65
    if kind == "set_speed":
        assert state.speed_mps == 1.1
    log = sim.fleet.mower(mower_id).commands
    assert log is not None
    assert (log[-1].command_id, log[-1].kind, log[-1].status) == (cid, kind, "executed")


async def test_impossible_command_fails_with_a_reason(
    sim: SimulatorServer, connect: Connect
) -> None:
    client = await connect(first_id(sim))
    result = await answered(client, await client.command("pause_mow"))
    assert result.status == "failed"
    assert result.reason is not None
    assert "nothing to pause" in result.reason


@pytest.mark.parametrize(
    "frame",
    [b"{definitely not json", b'{"type": "launch", "v": 1}', b"[1, 2, 3]"],
    ids=["not-json", "unknown-type", "not-an-object"],
)
async def test_malformed_frame_gets_an_error_frame_and_the_link_stays_up(
    sim: SimulatorServer, connect: Connect, frame: bytes
) -> None:
    client = await connect(first_id(sim))
    await client.send(frame)
    await eventually(lambda: bool(client.of(ErrorFrame)))
    assert client.of(ErrorFrame)[0].reason
    result = await answered(client, await client.command("set_speed", speed_mps=0.5))
    assert result.status == "executed"
    assert not client.closed.is_set()


async def test_unknown_command_kind_fails_with_its_command_id(
    sim: SimulatorServer, connect: Connect
) -> None:
    client = await connect(first_id(sim))
    result = await answered(client, await client.command("launch_rocket"))
    assert result.status == "failed"
    assert result.reason is not None
    assert "launch_rocket" in result.reason


async def test_repeated_command_id_is_answered_again_but_executed_once(
    sim: SimulatorServer, connect: Connect, http: aiohttp.ClientSession
) -> None:
    mower_id = first_id(sim)
    client = await connect(mower_id)
    cid = await client.command("start_mow")
    await answered(client, cid)
    await client.send(
        {"type": "command", "v": 1, "command_id": str(cid), "command": {"kind": "start_mow"}}
    )
    await eventually(lambda: sum(f.command_id == cid for f in client.of(OutcomeFrame)) == 2)
    log = sim.fleet.mower(mower_id).commands
    assert log is not None
    assert [r.command_id for r in log].count(cid) == 1
    # Both frames are counted: what the mower was sent, not only what it carried out.
    async with http.get(f"{sim.url}/sim/mowers/{mower_id}/frames") as r:
        assert (await r.json())["frames"][str(cid)] == 2


async def test_reject_fault_fails_every_command(sim: SimulatorServer, connect: Connect) -> None:
    mower_id = first_id(sim)
    client = await connect(mower_id)
    await sim.inject(mower_id, RejectFault())
    result = await answered(client, await client.command("emergency_stop"))
    assert result.status == "failed"
    await sim.clear_faults(mower_id)
    assert (await answered(client, await client.command("emergency_stop"))).status == "executed"


async def test_slow_handling_delays_outcomes_but_not_the_emergency_stop(
    sim: SimulatorServer, connect: Connect
) -> None:
    mower_id = first_id(sim)
    client = await connect(mower_id)
    await sim.inject(mower_id, LatencyFault(ms=300))
    t0 = time.monotonic()
    slow = await client.command("set_speed", speed_mps=0.6)
    await answered(client, slow)
    assert time.monotonic() - t0 >= 0.3
    start = await client.command("start_mow")
    stop = await client.command("emergency_stop")
    stop_result = await answered(client, stop, timeout=0.25)
    assert stop_result.status == "executed"
    start_result = await answered(client, start)
    assert (start_result.status, start_result.reason) == ("failed", "preempted by emergency_stop")
    # The queued start never ran. Sentinel: a command sent now runs after its own delay,
    # behind anything still queued; once it is answered, the start's time has passed.
    await answered(client, await client.command("set_blade_height", height_mm=40))
    assert sim.fleet.mower(mower_id).body.activity == "stopped"


async def test_silence_stops_states_but_not_outcomes(
    sim: SimulatorServer, connect: Connect
) -> None:
    mower_id = first_id(sim)
    client = await connect(mower_id)
    await eventually(lambda: bool(client.of(StateFrame)))
    await sim.inject(mower_id, SilenceFault(seconds=1.0))
    # A state sent just before the fault may still be on its way: the outcome of a command
    # sent after the fault comes behind it on the same socket.
    assert (await answered(client, await client.command("set_speed", speed_mps=1.0))).status == (
        "executed"
    )
    before = len(client.of(StateFrame))
    t0 = time.monotonic()
    await eventually(lambda: time.monotonic() - t0 > 0.4)  # periodic states fall due meanwhile
    # Sentinel: an outcome sent now comes behind any state sent meanwhile.
    await answered(client, await client.command("set_speed", speed_mps=1.1))
    assert len(client.of(StateFrame)) == before
    await eventually(lambda: len(client.of(StateFrame)) > before + 2)


async def test_link_loss_drops_and_refuses_until_it_is_over(
    sim: SimulatorServer, connect: Connect, http: aiohttp.ClientSession
) -> None:
    mower_id = first_id(sim)
    client = await connect(mower_id)
    await eventually(lambda: bool(client.of(StateFrame)))
    await sim.inject(mower_id, LinkLossFault(seconds=0.5))
    await eventually(client.closed.is_set)
    url = f"ws://127.0.0.1:{sim.port}/mowers/{mower_id}/ws"
    with pytest.raises(aiohttp.WSServerHandshakeError) as info:
        await http.ws_connect(url)
    assert info.value.status == 503

    again = await connect_after(connect, mower_id, timeout=3.0)
    await eventually(lambda: bool(again.of(StateFrame)))
    assert (await answered(again, await again.command("start_mow"))).status == "executed"


async def connect_after(connect: Connect, mower_id: uuid.UUID, timeout: float) -> DeviceClient:
    """Retry connecting until the link-loss fault is over."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            client: DeviceClient = await connect(mower_id)
            return client
        except aiohttp.WSServerHandshakeError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)  # the fault's refusal window is still open


async def test_a_newer_connection_replaces_the_older(
    sim: SimulatorServer, connect: Connect
) -> None:
    mower_id = first_id(sim)
    first = await connect(mower_id)
    second = await connect(mower_id)
    await eventually(first.closed.is_set)
    assert (await answered(second, await second.command("pause_mow"))).status == "failed"


@pytest.mark.parametrize("how", ["link-loss-fault", "gateway-closes"])
async def test_commands_waiting_when_the_link_drops_fail_and_a_resend_gets_that(
    sim: SimulatorServer, connect: Connect, how: str
) -> None:
    mower_id = first_id(sim)
    m = sim.fleet.mower(mower_id)
    client = await connect(mower_id)
    await eventually(lambda: bool(client.of(StateFrame)))
    await sim.inject(mower_id, LatencyFault(ms=800))
    speed = m.body.speed_mps
    cid = await client.command("set_speed", speed_mps=1.3)
    await eventually(lambda: m.commands is not None and m.commands[-1].command_id == cid)
    if how == "link-loss-fault":
        await sim.inject(mower_id, LinkLossFault(seconds=0.2))
        await eventually(client.closed.is_set)
    else:
        await client.close()
    log = m.commands
    assert log is not None
    await eventually(lambda: log[-1].status != "pending")
    assert (log[-1].status, log[-1].reason) == ("failed", "link lost before the command ran")

    again = await connect_after(connect, mower_id, timeout=3.0)
    await again.send(
        {
            "type": "command",
            "v": 1,
            "command_id": str(cid),
            "command": {"kind": "set_speed", "speed_mps": 1.3},
        }
    )
    result = await answered(again, cid, timeout=2.0)
    assert (result.status, result.reason) == ("failed", "link lost before the command ran")
    # Past its delay it still has not run, and the resend did not run it either.
    t0 = time.monotonic()
    await eventually(lambda: time.monotonic() - t0 > 1.0)
    assert m.body.speed_mps == speed
    assert [r.command_id for r in log].count(cid) == 1


async def test_a_command_that_expires_while_delayed_fails_and_does_not_run(
    sim: SimulatorServer, connect: Connect
) -> None:
    mower_id = first_id(sim)
    m = sim.fleet.mower(mower_id)
    client = await connect(mower_id)
    await sim.inject(mower_id, LatencyFault(ms=600))
    speed = m.body.speed_mps
    cid = uuid.uuid4()
    expires = datetime.now(UTC) + timedelta(seconds=0.2)
    await client.send(
        {
            "type": "command",
            "v": 1,
            "command_id": str(cid),
            "command": {"kind": "set_speed", "speed_mps": 1.3},
            "expires_at": expires.isoformat().replace("+00:00", "Z"),
        }
    )
    result = await answered(client, cid)
    assert (result.status, result.reason) == ("failed", "expired while waiting to be carried out")
    assert result.at > expires
    assert m.body.speed_mps == speed


async def test_latency_counts_from_each_commands_arrival_not_the_previous_outcome(
    sim: SimulatorServer, connect: Connect
) -> None:
    mower_id = first_id(sim)
    client = await connect(mower_id)
    await sim.inject(mower_id, LatencyFault(ms=800))
    t0 = time.monotonic()
    first = await client.command("set_speed", speed_mps=0.6)
    await asyncio.sleep(0.1)
    second = await client.command("set_blade_height", height_mm=50)
    await answered(client, first)
    t_first = time.monotonic() - t0
    await answered(client, second)
    t_second = time.monotonic() - t0
    assert t_first >= 0.8
    # Due 0.8 s after it arrived at 0.1 s: about 0.9 s, not 0.8 + 0.8 = 1.6 s.
    assert 0.9 <= t_second < 1.3
    order = [f.command_id for f in client.of(OutcomeFrame)]
    assert order.index(first) < order.index(second)


async def test_a_link_made_while_stopping_is_refused_and_the_stop_ends(
    sim: SimulatorServer, connect: Connect, http: aiohttp.ClientSession
) -> None:
    mower_id = first_id(sim)
    client = await connect(mower_id)
    await eventually(lambda: bool(client.of(StateFrame)))
    await sim.fleet.stop()  # the links are dropped; a device gateway dials again at once
    await eventually(client.closed.is_set)
    with pytest.raises(aiohttp.WSServerHandshakeError) as info:
        await http.ws_connect(f"ws://127.0.0.1:{sim.port}/mowers/{mower_id}/ws")
    assert info.value.status == 503
    started = time.monotonic()
    await sim.stop()
    assert time.monotonic() - started < 5
