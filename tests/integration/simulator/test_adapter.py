"""The gateway's ``simulator`` connection against a running in-process simulator."""

from __future__ import annotations

import asyncio
import gc
import uuid
from collections.abc import AsyncIterator

import msgspec
import pytest

from contracts.v1 import (
    Connection,
    EmergencyStop,
    MowerRegistration,
    MowerState,
    PauseMow,
    StartMow,
)
from mowdeck.gateway.connections import (
    CommandTimeoutError,
    ConnectionAdapters,
    ConnectionDeps,
    ConnectionError,
    LinkDownError,
)
from mowdeck.gateway.connections.simulator import SimulatorConnection
from simulator import BatteryFault, LatencyFault, LinkLossFault, SimulatorServer
from tests.support.eventually import eventually
from tests.support.links import HOSTS, Recorder, envelope


@pytest.fixture
async def link(sim: SimulatorServer) -> AsyncIterator[tuple[SimulatorConnection, Recorder]]:
    reg = sim.registrations()[0]
    rec = Recorder()
    factory = ConnectionAdapters.from_entry_points().factory("simulator")
    conn = factory(reg, rec, deps=ConnectionDeps(HOSTS))
    assert isinstance(conn, SimulatorConnection)
    await conn.open()
    await eventually(lambda: conn.connected)
    yield conn, rec
    await conn.close()


async def test_states_flow_stamped_with_the_registration(
    sim: SimulatorServer, link: tuple[SimulatorConnection, Recorder]
) -> None:
    conn, rec = link
    await eventually(lambda: len(rec.states) >= 3)
    assert rec.links == [(True, None)]
    assert {(s.mower_id, s.account_id) for s in rec.states} == {
        (conn.registration.mower_id, conn.registration.account_id)
    }


async def test_commands_come_back_with_outcomes(
    sim: SimulatorServer, link: tuple[SimulatorConnection, Recorder]
) -> None:
    conn, rec = link
    reg = conn.registration
    await sim.inject(reg.mower_id, BatteryFault(level=100))
    failed = await conn.send(envelope(reg, PauseMow()), timeout=2.0)
    assert failed.status == "failed"
    assert failed.reason
    done = await conn.send(envelope(reg, StartMow(duration_min=10)), timeout=2.0)
    assert (done.status, done.reason) == ("executed", None)
    await eventually(lambda: rec.states[-1].activity in ("leaving", "mowing"))


async def test_timeout_when_the_mower_is_slow(
    sim: SimulatorServer, link: tuple[SimulatorConnection, Recorder]
) -> None:
    conn, _ = link
    await sim.inject(conn.registration.mower_id, LatencyFault(ms=1000))
    with pytest.raises(CommandTimeoutError):
        await conn.send(envelope(conn.registration, StartMow()), timeout=0.2)
    # The emergency stop is not held up by the slow start still being handled.
    stop = await conn.send(envelope(conn.registration, EmergencyStop()), timeout=0.5)
    assert stop.status == "executed"


async def test_link_loss_is_reported_and_the_link_comes_back(
    sim: SimulatorServer, link: tuple[SimulatorConnection, Recorder]
) -> None:
    conn, rec = link
    await sim.inject(conn.registration.mower_id, LinkLossFault(seconds=0.5))
    await eventually(lambda: len(rec.links) >= 2)
    assert rec.links[1][0] is False
    assert rec.links[1][1]
    with pytest.raises(LinkDownError):
        await conn.send(envelope(conn.registration, StartMow()), timeout=1.0)
    await eventually(lambda: len(rec.links) >= 3, timeout=8.0)
    assert rec.links[2] == (True, None)
    assert (await conn.send(envelope(conn.registration, PauseMow()), timeout=2.0)).status


async def test_a_failing_state_callback_does_not_end_the_link_for_good(
    sim: SimulatorServer,
) -> None:
    reg = sim.registrations()[2]

    class Flaky(Recorder):
        failed = False

        def on_state(self, state: MowerState) -> None:
            if not self.failed:
                self.failed = True
                raise RuntimeError("a bug downstream")
            super().on_state(state)

    rec = Flaky()
    conn = SimulatorConnection(reg, rec, deps=ConnectionDeps(HOSTS))
    await conn.open()
    try:
        # Reported down with the error, then connected again, and states flow.
        await eventually(lambda: len(rec.links) >= 3, timeout=8.0)
        assert rec.links[0] == (True, None)
        assert rec.links[1][0] is False
        assert "a bug downstream" in (rec.links[1][1] or "")
        assert rec.links[2] == (True, None)
        await eventually(lambda: len(rec.states) >= 1)
    finally:
        await conn.close()


async def test_simulator_restart_is_survived(sim: SimulatorServer) -> None:
    reg = sim.registrations()[1]
    rec = Recorder()
    conn = SimulatorConnection(reg, rec, deps=ConnectionDeps(HOSTS))
    await conn.open()
    await eventually(lambda: conn.connected)
    await sim.stop()
    await eventually(lambda: not conn.connected)
    assert rec.links[-1][0] is False
    port = sim.port
    again = SimulatorServer(sim.fleet.config, port=port, fleet=sim.fleet)
    await again.start()
    try:
        await eventually(lambda: conn.connected, timeout=8.0)
        assert rec.links[-1] == (True, None)
    finally:
        await conn.close()
        await again.stop()
    assert rec.links[-1] == (False, "closed")


async def test_not_connected_raises_link_down() -> None:
    reg = MowerRegistration(
        mower_id=uuid.uuid4(),
        account_id=uuid.uuid4(),
        name="nowhere",
        connection=Connection(kind="simulator", options={"url": "ws://127.0.0.1:9/x"}),
    )
    conn = SimulatorConnection(reg, Recorder(), deps=ConnectionDeps(HOSTS))
    await conn.open()
    try:
        with pytest.raises(LinkDownError):
            await conn.send(envelope(reg, StartMow()), timeout=0.1)
    finally:
        await conn.close()


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"url": "http://x"},
        {"url": "ws://x", "heartbeat_seconds": -1},
        {"url": "ws://x", "heartbeat_seconds": 1e-9},
        {"url": "ws://x", "backoff_initial_seconds": 1e-9},
        {"url": "ws://x", "backoff_max_seconds": 1e-9},
        {"url": "ws://x", "connect_timeout_seconds": 1e-9},
        {"url": "ws://x", "backoff_initial_seconds": 10, "backoff_max_seconds": 1},
    ],
    ids=[
        "missing-url",
        "not-websocket",
        "negative-heartbeat",
        "nanosecond-heartbeat",
        "nanosecond-reconnect",
        "nanosecond-backoff-cap",
        "nanosecond-connect-timeout",
        "cap-below-first-backoff",
    ],
)
def test_invalid_options_are_refused(options: dict[str, object]) -> None:
    reg = MowerRegistration(
        mower_id=uuid.uuid4(),
        account_id=uuid.uuid4(),
        name="m",
        connection=Connection(kind="simulator", options=options),
    )
    with pytest.raises(ConnectionError, match="options"):
        SimulatorConnection(reg, Recorder(), deps=ConnectionDeps(HOSTS))


def test_registrations_carry_no_secrets(sim: SimulatorServer) -> None:
    for reg in sim.registrations():
        assert set(reg.connection.options) == {"url"}
        assert reg.connection.options["url"].endswith(f"/mowers/{reg.mower_id}/ws")
        assert msgspec.json.decode(msgspec.json.encode(reg), type=MowerRegistration) == reg


async def test_a_link_that_goes_down_while_a_command_is_written_leaves_no_stray_error(
    link: tuple[SimulatorConnection, Recorder],
) -> None:
    # The reader notices the loss and fails every waiting command while the write of
    # this one is still under way; the write then fails too. The caller gets that error,
    # and the future's own one is not left over as "never retrieved".
    conn, _ = link
    ws = conn._ws
    assert ws is not None
    stray: list[dict[str, object]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: stray.append(context))

    async def send_bytes(data: bytes) -> None:
        await conn._link_down("link closed")
        raise ConnectionResetError("connection reset by peer")

    ws.send_bytes = send_bytes  # type: ignore[method-assign]
    try:
        with pytest.raises(LinkDownError, match="while sending"):
            await conn.send(envelope(conn.registration, StartMow()), timeout=1.0)
        gc.collect()
        await asyncio.sleep(0)
        assert stray == []
    finally:
        loop.set_exception_handler(None)
