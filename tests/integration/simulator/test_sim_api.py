"""The /sim HTTP API, a whole mow-return-charge cycle at speed, and the CLI."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from contracts.v1 import MowerRegistration, StartMow, decode
from simulator import BatteryFault, FleetConfig, SimulatorServer, physics
from tests.integration.simulator.test_device_protocol import Connect, answered
from tests.support.eventually import eventually


async def get(http: aiohttp.ClientSession, url: str) -> Any:
    async with http.get(url) as resp:
        assert resp.status == 200
        return await resp.json()


async def test_list_and_detail(sim: SimulatorServer, http: aiohttp.ClientSession) -> None:
    listed = await get(http, f"{sim.url}/sim/mowers")
    assert listed["count"] == 3
    mower_id = listed["mowers"][0]["mower_id"]
    detail = await get(http, f"{sim.url}/sim/mowers/{mower_id}")
    assert detail["state"]["mower_id"] == mower_id
    assert detail["commands"] == []
    assert len(detail["garden"]["polygon"]) == 4
    regs = await get(http, f"{sim.url}/sim/registrations")
    assert [r["mower_id"] for r in regs] == [m["mower_id"] for m in listed["mowers"]]


@pytest.mark.parametrize(
    ("fault", "listed"),
    [
        ({"kind": "stuck"}, "stuck"),
        ({"kind": "error", "code": "lifted"}, "error"),
        ({"kind": "silence", "seconds": 30}, "silence"),
        ({"kind": "latency", "ms": 100}, "latency"),
        ({"kind": "reject"}, "reject"),
        ({"kind": "link_loss", "seconds": 30}, "link_loss"),
        ({"kind": "escape"}, "escape"),
        ({"kind": "theft", "speed_mps": 5}, "theft"),
    ],
    ids=["stuck", "error", "silence", "latency", "reject", "link-loss", "escape", "theft"],
)
async def test_inject_and_clear_faults(
    sim: SimulatorServer, http: aiohttp.ClientSession, fault: dict[str, Any], listed: str
) -> None:
    url = f"{sim.url}/sim/mowers/{sim.fleet.mowers[0].mower_id}/faults"
    async with http.post(url, json=fault) as resp:
        assert resp.status == 200
        assert listed in (await resp.json())["faults"]
    async with http.delete(url) as resp:
        assert (await resp.json())["faults"] == {}


async def test_battery_fault_sets_the_level(
    sim: SimulatorServer, http: aiohttp.ClientSession
) -> None:
    mower_id = sim.fleet.mowers[0].mower_id
    async with http.post(
        f"{sim.url}/sim/mowers/{mower_id}/faults", json={"kind": "battery", "level": 3}
    ) as resp:
        assert resp.status == 200
    detail = await get(http, f"{sim.url}/sim/mowers/{mower_id}")
    assert detail["state"]["battery"] <= 4


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("/sim/mowers/{id}/faults", {"kind": "melt"}, 422),
        ("/sim/mowers/{id}/faults", {"kind": "battery", "level": 101}, 422),
        (f"/sim/mowers/{uuid.uuid4()}/faults", {"kind": "stuck"}, 404),
        ("/sim/mowers/not-a-uuid/faults", {"kind": "stuck"}, 404),
    ],
    ids=["unknown-kind", "out-of-range", "unknown-mower", "bad-id"],
)
async def test_bad_fault_requests_are_problems(
    sim: SimulatorServer, http: aiohttp.ClientSession, path: str, body: Any, status: int
) -> None:
    url = sim.url + path.replace("{id}", str(sim.fleet.mowers[0].mower_id))
    async with http.post(url, json=body) as resp:
        assert resp.status == status
        assert resp.content_type == "application/problem+json"
        assert (await resp.json())["detail"]


async def test_a_whole_mow_return_charge_resume_cycle_takes_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every activity the physics passes through, slice by slice: at 2,000x one advance
    # can cross a whole phase, so sampling the body between polls could miss one.
    seen: list[str] = []
    advance = physics._advance

    def recording(b: physics.Body, *args: Any) -> physics.Body:
        after = advance(b, *args)
        if not seen or seen[-1] != after.activity:
            seen.append(after.activity)
        return after

    monkeypatch.setattr(physics, "_advance", recording)
    server = SimulatorServer(FleetConfig(mowers=1, seed=5, speed=2000.0, report_interval=5.0))
    await server.start()
    try:
        mower_id = server.fleet.mowers[0].mower_id
        m = server.fleet.mower(mower_id)
        await server.inject(mower_id, BatteryFault(level=100))
        assert m.execute(StartMow(), server.fleet.clock.now()) is None
        seen[:] = [m.body.activity]  # from the start of the job on

        def reached(*tail: str) -> bool:
            m.advance(server.fleet.clock.now())
            return _follows(seen, tail)

        await eventually(lambda: reached("mowing"))
        await server.inject(mower_id, BatteryFault(level=16))
        await eventually(lambda: reached("returning", "charging", "leaving"), timeout=10.0)
        assert seen[:2] == ["leaving", "mowing"]
        assert _follows(seen, ("returning", "charging", "leaving"))
        assert m.body.job == "active"
        assert m.body.progress > 0
    finally:
        await server.stop()


def _follows(seen: list[str], run: tuple[str, ...]) -> bool:
    """Whether ``run`` occurs in ``seen`` as consecutive activities."""
    n = len(run)
    return any(tuple(seen[i : i + n]) == run for i in range(len(seen) - n + 1))


async def test_cli_writes_the_bootstrap_file(tmp_path: Path) -> None:
    boot = tmp_path / "mowers.json"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mowdeck.cli",
        "sim",
        "--mowers",
        "4",
        "--listen",
        "127.0.0.1:0",
        "--seed",
        "9",
        "--bootstrap-file",
        str(boot),
        "--log-level",
        "warning",
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 20)
        assert b"simulator listening on" in line
        regs = [decode(json.dumps(r), MowerRegistration) for r in json.loads(boot.read_text())]
        assert len(regs) == 4
        assert {r.connection.kind for r in regs} == {"simulator"}
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 10) == 0


async def sim_cli(*argv: str) -> tuple[int, str]:
    """Run ``mowdeck sim`` until it exits; its exit code and stderr."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mowdeck.cli",
        "sim",
        "--mowers",
        "1",
        "--log-level",
        "warning",
        *argv,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        _, err = await asyncio.wait_for(proc.communicate(), 20)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, err.decode()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        # 192.0.2.0/24 is reserved for documentation: no machine has that address.
        (["--listen", "192.0.2.1:8090"], "mowdeck sim: cannot listen on 192.0.2.1:8090"),
        (["--listen", "127.0.0.1:0", "--bootstrap-file", "."], "mowdeck sim: cannot write '.'"),
        (["--listen", "127.0.0.1:99999"], "port must be 0 to 65535"),
        (["--report-interval", "0"], "expected a positive finite number"),
    ],
    ids=["host-not-here", "bootstrap-is-a-folder", "port-out-of-range", "zero-interval"],
)
async def test_cli_start_problems_are_one_line_errors(argv: list[str], says: str) -> None:
    code, err = await sim_cli(*argv)
    assert code == 2
    assert says in err
    assert "Traceback" not in err


async def test_cli_port_in_use_is_a_one_line_error() -> None:
    taken = SimulatorServer(FleetConfig(mowers=1))
    await taken.start()
    try:
        code, err = await sim_cli("--listen", f"127.0.0.1:{taken.port}")
    finally:
        await taken.stop()
    assert code == 2
    assert err.startswith(f"mowdeck sim: cannot listen on 127.0.0.1:{taken.port}")
    assert len(err.strip().splitlines()) == 1


async def test_areas_set_through_the_api_name_where_a_start_mows(
    sim: SimulatorServer, http: aiohttp.ClientSession, connect: Connect
) -> None:
    m = sim.fleet.mowers[0]
    g = m.garden
    ring = [[lon, lat] for lat, lon in (g.to_latlon(x, y) for x, y in
            [(1, 1), (9, 1), (9, 7), (1, 7), (1, 1)])]  # fmt: skip
    doc = {
        "type": "FeatureCollection",
        "features": [
            {
                "type": "Feature",
                "properties": {"kind": "work_area", "name": "corner"},
                "geometry": {"type": "Polygon", "coordinates": [ring]},
            }
        ],
    }
    url = f"{sim.url}/sim/mowers/{m.mower_id}/areas"
    async with http.put(url, json=doc) as resp:
        assert resp.status == 200, await resp.text()
        assert [a["name"] for a in (await resp.json())["areas"]] == ["corner"]
    doc["features"][0]["geometry"]["coordinates"] = [ring[:-1]]  # type: ignore[index]
    async with http.put(url, json=doc) as resp:
        assert resp.status == 422
        assert "features[0]" in (await resp.json())["detail"]
    # The start comes as the gateway sends it: a device-protocol command frame.
    client = await connect(m.mower_id)
    failed = await answered(client, await client.command("start_mow", work_area="nowhere"))
    assert (failed.status, failed.reason) == ("failed", "no work area named 'nowhere'")
    started = await answered(client, await client.command("start_mow", work_area="corner"))
    assert started.status == "executed"
    assert m.garden.route is not None
    assert m.garden.path_length < 8 * 6 / 0.25 + 20  # the corner, not the whole lawn
