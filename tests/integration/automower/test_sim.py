"""The simulator's mowers speaking Automower Connect: physics and faults through the adapter."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from contracts.v1 import (
    EmergencyStop,
    MowerRegistration,
    PauseMow,
    SetBladeHeight,
    StartMow,
)
from mowdeck.devices.automower import AutomowerEndpoints
from mowdeck.gateway.connections import ConnectionDeps
from mowdeck.gateway.connections.automower import AutomowerConnection
from mowdeck.gateway.connections.credentials import Credentials
from simulator import BatteryFault, ErrorFault, FleetConfig, SimulatorServer
from simulator.automower.bridge import AutomowerBridges
from tests.support.eventually import eventually
from tests.support.links import HOSTS, Recorder, envelope


@pytest.fixture
async def bridged(
    tmp_path: Path,
) -> AsyncIterator[tuple[SimulatorServer, AutomowerBridges, ConnectionDeps]]:
    server = SimulatorServer(FleetConfig(mowers=3, seed=3, speed=20.0, report_interval=2.0))
    await server.start()
    # A fast limit: the test is about the bridge, the account link's limiter has its own.
    bridges = AutomowerBridges(server.fleet, credentials=2, rate=50.0)
    await bridges.start()
    bridges.write_credentials(tmp_path)
    endpoints = AutomowerEndpoints(
        token_url=bridges.endpoints["MOWDECK_AUTOMOWER_TOKEN_URL"],
        api_url=bridges.endpoints["MOWDECK_AUTOMOWER_API_URL"],
        ws_url=bridges.endpoints["MOWDECK_AUTOMOWER_WS_URL"],
    )
    deps = ConnectionDeps(HOSTS, Credentials(tmp_path), automower=endpoints)
    yield server, bridges, deps
    await deps.close()
    await bridges.stop()
    await server.stop()


async def test_virtual_mowers_mow_pause_and_fail_through_the_stand_in_cloud(
    bridged: tuple[SimulatorServer, AutomowerBridges, ConnectionDeps],
) -> None:
    server, bridges, deps = bridged
    regs = bridges.registrations()
    assert {r.connection.kind for r in regs} == {"automower"}
    assert {r.connection.options["credentials"] for r in regs} == {
        "sim-automower-1",
        "sim-automower-2",
    }
    reg = regs[0]
    rec = Recorder()
    conn = AutomowerConnection(reg, rec, deps=deps)
    await conn.open()
    try:
        await eventually(lambda: conn.connected and rec.states, 10)
        mower = server.fleet.mower(reg.mower_id)
        assert rec.states[-1].raw["automower.model"] == "Automower 450X (simulated)"
        lat, lon = mower.garden.to_latlon(mower.body.x, mower.body.y)
        assert rec.states[-1].position is not None
        assert rec.states[-1].position.lat == pytest.approx(lat, abs=1e-6)
        assert rec.states[-1].position.lon == pytest.approx(lon, abs=1e-6)

        await server.inject(reg.mower_id, BatteryFault(level=100))
        assert (await conn.send(envelope(reg, StartMow()), timeout=5)).status == "executed"
        await eventually(lambda: mower.body.activity == "mowing", 10)
        await eventually(lambda: rec.states[-1].activity == "mowing", 5)
        moved = len({(s.position.lat, s.position.lon) for s in rec.states if s.position})
        await eventually(
            lambda: (
                len({(s.position.lat, s.position.lon) for s in rec.states if s.position})
                > moved + 1
            ),
            10,
        )
        assert (await conn.send(envelope(reg, PauseMow()), timeout=5)).status == "executed"
        assert mower.body.activity == "paused"
        height = await conn.send(envelope(reg, SetBladeHeight(height_mm=50)), timeout=5)
        assert height.status == "executed"
        assert mower.body.blade_height_mm == 50

        await server.inject(reg.mower_id, ErrorFault(code="lifted"))
        await eventually(lambda: rec.states[-1].activity == "error", 5)
        assert rec.states[-1].error_code == "automower.71"
        stop = await conn.send(envelope(reg, EmergencyStop()), timeout=5)
        assert stop.status == "executed"
    finally:
        await conn.close()


async def test_a_work_area_start_on_a_simulated_mower_is_rejected_with_a_reason(
    bridged: tuple[SimulatorServer, AutomowerBridges, ConnectionDeps],
) -> None:
    _, bridges, deps = bridged
    reg = bridges.registrations()[1]
    conn = AutomowerConnection(reg, Recorder(), deps=deps)
    await conn.open()
    try:
        await eventually(lambda: conn.connected, 10)
        found = await conn.send(envelope(reg, StartMow(work_area="Front lawn")), timeout=5)
        assert found.status == "rejected"
        assert "has no work areas" in (found.reason or "")
    finally:
        await conn.close()


async def test_mowdeck_sim_speaks_automower_through_a_stand_in_cloud(tmp_path: Path) -> None:
    boot, keys = tmp_path / "mowers.json", tmp_path / "keys"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mowdeck.cli", "sim", "--protocol", "automower",
        "--mowers", "3", "--seed", "4", "--listen", "127.0.0.1:0", "--credentials", "2",
        "--credentials-dir", str(keys), "--bootstrap-file", str(boot), "--log-level", "warning",
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        lines = [await asyncio.wait_for(proc.stdout.readline(), 20) for _ in range(6)]
        text = b"".join(lines).decode()
        assert "3 mowers speak Automower Connect on http://127.0.0.1:" in text
        settings = dict(line.strip().split("=", 1) for line in text.splitlines() if "=" in line)
        regs = msgspec.json.decode(boot.read_bytes(), type=list[MowerRegistration])
        assert {r.connection.kind for r in regs} == {"automower"}
        assert sorted(p.name for p in keys.iterdir()) == [
            "sim-automower-1.json",
            "sim-automower-2.json",
        ]
        endpoints = AutomowerEndpoints(
            token_url=settings["MOWDECK_AUTOMOWER_TOKEN_URL"],
            api_url=settings["MOWDECK_AUTOMOWER_API_URL"],
            ws_url=settings["MOWDECK_AUTOMOWER_WS_URL"],
        )
        deps = ConnectionDeps(HOSTS, Credentials(keys), automower=endpoints)
        conn = AutomowerConnection(regs[2], Recorder(), deps=deps)
        await conn.open()
        try:
            await eventually(lambda: conn.connected, 10)
        finally:
            await conn.close()
            await deps.close()
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 10) == 0
