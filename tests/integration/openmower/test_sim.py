"""``mowdeck sim --protocol openmower``: stand-in OpenMowers the gateway's adapter links."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest

from contracts.v1 import CommandEnvelope, MowerRegistration, MowerState, StartMow
from mowdeck.devices.endpoints import DeviceHosts
from mowdeck.gateway.connections import ConnectionDeps
from mowdeck.gateway.connections.openmower import OpenMowerConnection
from tests.integration.simulator.test_sim_api import sim_cli
from tests.support.eventually import eventually
from tests.support.mosquitto import Mosquitto


class Recorder:
    def __init__(self) -> None:
        self.states: list[MowerState] = []

    def on_state(self, state: MowerState) -> None:
        self.states.append(state)

    def on_link(self, up: bool, reason: str | None) -> None:
        pass


async def test_the_simulator_speaks_openmower_through_a_broker(
    broker: Mosquitto, tmp_path: Path
) -> None:
    boot = tmp_path / "mowers.json"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mowdeck.cli", "sim", "--protocol", "openmower",
        "--broker", broker.url, "--mowers", "3", "--seed", "4", "--report-interval", "0.1",
        "--bootstrap-file", str(boot), "--log-level", "warning",
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 20)
        assert f"3 OpenMower stand-ins on {broker.url}".encode() in line
        regs = msgspec.json.decode(boot.read_bytes(), type=list[MowerRegistration])
        assert {r.connection.kind for r in regs} == {"openmower"}
        assert len({r.connection.options["prefix"] for r in regs}) == 3
        assert json.loads(boot.read_text())[0]["connection"]["options"]["broker"] == broker.url

        rec = Recorder()
        conn = OpenMowerConnection(regs[1], rec, deps=ConnectionDeps(DeviceHosts(["127.0.0.1"])))
        await conn.open()
        try:
            await eventually(lambda: conn.connected and conn.actions is not None)
            start = CommandEnvelope.issue(
                mower_id=regs[1].mower_id,
                account_id=regs[1].account_id,
                command=StartMow(),
                issued_by="test",
                now=datetime.now(UTC),
            )
            assert (await conn.send(start, timeout=5)).status == "executed"
            await eventually(lambda: rec.states[-1].activity == "mowing", 5)
            assert rec.states[-1].position is not None
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
    ],
    ids=["unreachable", "not-mqtt"],
)
async def test_a_broker_problem_is_a_one_line_error(broker_url: str, says: str) -> None:
    code, err = await sim_cli("--protocol", "openmower", "--broker", broker_url)
    assert code == 2
    assert says in err
    assert "Traceback" not in err
