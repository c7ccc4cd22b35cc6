"""The simulator's mowers speaking OpenMower: physics and faults through the adapter."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from contracts.v1 import MowerRegistration, PauseMow, StartMow
from mowdeck.devices.endpoints import DeviceHosts
from mowdeck.gateway.connections import ConnectionDeps
from mowdeck.gateway.connections.openmower import OpenMowerConnection
from simulator import BatteryFault, FleetConfig, SilenceFault, SimulatorServer
from simulator.openmower.bridge import OpenMowerBridges
from tests.integration.simulator.test_sim_api import sim_cli
from tests.support.eventually import eventually
from tests.support.links import Recorder, envelope
from tests.support.mosquitto import Mosquitto


@pytest.fixture
async def bridged(
    broker: Mosquitto,
) -> AsyncIterator[tuple[SimulatorServer, list[MowerRegistration]]]:
    server = SimulatorServer(FleetConfig(mowers=2, seed=3, speed=20.0, report_interval=2.0))
    await server.start()
    bridges = OpenMowerBridges(server.fleet, "127.0.0.1", broker.port)
    await bridges.start()
    yield server, bridges.registrations(broker.url)
    await bridges.stop()
    await server.stop()


async def test_virtual_mowers_mow_pause_and_go_silent_over_openmower(
    bridged: tuple[SimulatorServer, list[MowerRegistration]],
) -> None:
    server, regs = bridged
    reg = regs[0]
    assert reg.connection.kind == "openmower"
    rec = Recorder()
    conn = OpenMowerConnection(
        msgspec.structs.replace(
            reg, connection=msgspec.structs.replace(
                reg.connection, options={**reg.connection.options, "stale_seconds": 1}
            ),
        ),
        rec,
        deps=ConnectionDeps(DeviceHosts(["127.0.0.1"])),
    )  # fmt: skip
    await conn.open()
    try:
        await eventually(lambda: conn.connected and conn.actions is not None)
        mower = server.fleet.mower(reg.mower_id)
        # The virtual mower's own position, read back through the datum.
        lat, lon = mower.garden.to_latlon(mower.body.x, mower.body.y)
        assert rec.states[-1].position is not None
        assert rec.states[-1].position.lat == pytest.approx(lat, abs=1e-6)
        assert rec.states[-1].position.lon == pytest.approx(lon, abs=1e-6)

        await server.inject(reg.mower_id, BatteryFault(level=100))  # leaves the dock at once
        assert (await conn.send(envelope(reg, StartMow()), timeout=5)).status == "executed"
        await eventually(lambda: mower.body.activity == "mowing", 10)
        await eventually(lambda: conn.actions is not None and conn.actions.get(
            "mower_logic:mowing/pause"), 5)  # fmt: skip
        assert (await conn.send(envelope(reg, PauseMow()), timeout=5)).status == "executed"
        assert mower.body.activity == "paused"

        await server.inject(reg.mower_id, SilenceFault(seconds=30))
        await eventually(lambda: not conn.connected, 5)
        assert "no robot_state" in (rec.links[-1][1] or "")
    finally:
        await conn.close()


async def test_mowdeck_sim_speaks_openmower_on_a_broker(broker: Mosquitto, tmp_path: Path) -> None:
    boot = tmp_path / "mowers.json"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mowdeck.cli", "sim", "--protocol", "openmower",
        "--broker", broker.url, "--mowers", "3", "--seed", "4", "--listen", "127.0.0.1:0",
        "--bootstrap-file", str(boot), "--log-level", "warning",
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 20)
        assert f"3 mowers speak OpenMower on {broker.url}".encode() in line
        regs = msgspec.json.decode(boot.read_bytes(), type=list[MowerRegistration])
        assert {r.connection.kind for r in regs} == {"openmower"}
        assert {r.connection.options["broker"] for r in regs} == {broker.url}
        assert len({r.connection.options["prefix"] for r in regs}) == 3
        assert all(uuid.UUID(r.connection.options["prefix"].split("/")[1]) == r.mower_id
                   for r in regs)  # fmt: skip
        conn = OpenMowerConnection(
            regs[1], Recorder(), deps=ConnectionDeps(DeviceHosts(["127.0.0.1"]))
        )
        await conn.open()
        try:
            await eventually(lambda: conn.connected)
        finally:
            await conn.close()
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 10) == 0


@pytest.mark.parametrize(
    ("broker_url", "says"),
    [
        ("mqtt://127.0.0.1:1", "mowdeck sim: cannot reach the broker mqtt://127.0.0.1:1:"),
        ("http://127.0.0.1:1883", "mowdeck sim: --broker: expected mqtt://HOST:PORT"),
        ("mqtt://127.0.0.1", "mowdeck sim: --broker: expected mqtt://HOST:PORT"),
    ],
    ids=["unreachable", "not-mqtt", "no-port"],
)
async def test_a_broker_problem_is_a_one_line_error(broker_url: str, says: str) -> None:
    code, err = await sim_cli(
        "--protocol", "openmower", "--broker", broker_url, "--listen", "127.0.0.1:0"
    )
    assert code == 2
    assert says in err
    assert "Traceback" not in err
