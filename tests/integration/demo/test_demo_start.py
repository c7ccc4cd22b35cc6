"""``mowdeck demo``: a signal during a start that hangs stops it; start-up errors are one line."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import structlog
import yarl

from contracts.v1 import MowerListRequest
from mowdeck import demo
from mowdeck.cli import main
from mowdeck.gateway.service import GatewayService
from mowdeck.kit.bus import Bus
from mowdeck.kit.seed import list_mowers
from tests.integration.demo.commands import command_through
from tests.support.eventually import eventually
from tests.support.natscluster import refused_at_connect
from tests.support.natsserver import NatsServer
from tests.support.sharedtemp import shared_temp_folder


def _args(port: int = 0) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    demo.configure(parser)
    state = Path(tempfile.gettempdir(), "demo-state-of-the-tests")  # outside the checkout
    return parser.parse_args(["--port", str(port), "--mowers", "2", "--state-dir", str(state)])


def _started_in(folder: Path) -> list[str]:
    """What the demo left in ``folder``: its temp folders."""
    return [p.name for p in folder.iterdir() if p.name.startswith("mowdeck-")]


def _processes_under(folder: Path) -> list[str]:
    """Command lines of running processes that name ``folder`` (the embedded servers)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if str(folder) in cmdline and state != "Z":
            found.append(cmdline)
    return found


@pytest.fixture
def demo_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temp folder for everything the demo starts, and no configured NATS or PostgreSQL."""
    with shared_temp_folder() as folder:
        monkeypatch.setattr(tempfile, "tempdir", str(folder))
        for name in ("MOWDECK_NATS_URL", "MOWDECK_DATABASE_URL", "MOWDECK_JWT_SECRET"):
            monkeypatch.delenv(name, raising=False)
        yield folder


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self").exists(), reason="reads /proc")
async def test_a_signal_while_the_bus_is_unreachable_stops_and_cleans_up(
    demo_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reached = asyncio.Event()

    async def unreachable(*args: object, **kwargs: object) -> None:
        # Bus.connect retries for ever while NATS is not there.
        reached.set()
        await asyncio.Event().wait()

    monkeypatch.setattr(Bus, "connect", unreachable)
    running = asyncio.ensure_future(demo.run(_args()))
    await asyncio.wait_for(reached.wait(), 60)
    assert _started_in(demo_tmp)  # the embedded servers run
    os.kill(os.getpid(), signal.SIGTERM)
    assert await asyncio.wait_for(running, 30) == 0
    assert _started_in(demo_tmp) == []
    assert _processes_under(demo_tmp) == []


def test_a_port_in_use_is_one_line(
    nats_server: NatsServer,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("MOWDECK_NATS_URL", nats_server.url)
    monkeypatch.setenv("MOWDECK_DATABASE_URL", database_url)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["demo", "--port", str(port), "--mowers", "1"]) == 2
    err = capsys.readouterr().err
    assert "mowdeck demo: cannot start the services:" in err
    assert "address already in use" in err
    assert "Traceback" not in err


async def _connections(monitor_url: str) -> list[dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{monitor_url}/connz", params={"auth": "true", "limit": "100"}) as r,
    ):
        body = await r.json()
    return list(body["connections"])


@pytest.mark.slow
async def test_the_demo_bus_refuses_strangers_and_every_service_is_its_own_user(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The servers' temp folders stay in the system's: the embedded PostgreSQL runs as a
    # user of its own, which may not enter pytest's private folders.
    for name in ("MOWDECK_NATS_URL", "MOWDECK_DATABASE_URL", "MOWDECK_JWT_SECRET"):
        monkeypatch.delenv(name, raising=False)
    with structlog.testing.capture_logs() as logs:
        async with demo.running_demo(_args()) as running:
            await _check_bus_users(running)
            await command_through(running)
            await _check_device_hosts(running)
    refused = [e for e in logs if e["event"] == "nats permission refused"]
    assert refused == []


async def _check_device_hosts(running: demo.Demo) -> None:
    # The gateway and Fleet may dial the demo's simulator, not the machine's other
    # services: a mower registered with the bus's address is refused by name.
    simulator = yarl.URL(running.sim_url)
    [gateway] = [s for s in running.services if isinstance(s, GatewayService)]
    assert gateway.settings.gateway_device_hosts == [f"{simulator.host}:{simulator.port}"]
    assert running.nats is not None
    bus = yarl.URL(running.nats.url)
    connection = {"kind": "simulator", "options": {"url": f"ws://{bus.host}:{bus.port}/"}}
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Bearer {running.token}"}) as http,
        http.post(
            f"{running.fleet_url}/v1/mowers", json={"name": "bus", "connection": connection}
        ) as r,
    ):
        problem = await r.json(content_type=None)
    assert (r.status, problem["field"]) == (422, "connection.options.url"), problem


async def _check_bus_users(running: demo.Demo) -> None:
    nats_bus = running.nats
    assert nats_bus is not None
    assert nats_bus.monitor_url is not None
    assert "authorization violation" in await refused_at_connect(nats_bus.url)
    wrong = await refused_at_connect(nats_bus.url, user="fleet", password="guessed")
    assert "authorization violation" in wrong

    # Every connection is authenticated, and each service runs as its own user on a
    # connection of its own (the gateway has two: its bus and its emergency lane).
    connections = await _connections(nats_bus.monitor_url)
    users = {c["name"]: c.get("authorized_user") for c in connections}
    assert users == {
        "fleet": "fleet",
        "telemetry": "telemetry",
        "notifications": "notifications",
        "realtime": "realtime",
        "gateway-0": "gateway",
        "gateway-0-estop": "gateway",
        "demo-scenario": "fleet",
    }
    assert len(connections) == len(users)  # no other, no shared one

    # Work crosses users: the gateway learned its mowers from Fleet (fleet.mowers.list
    # answered by Fleet's user, its events) and holds a link to each of them.
    [gateway] = [s for s in running.services if isinstance(s, GatewayService)]
    await eventually(lambda: len(gateway.connections) == len(running.mowers), timeout=30)

    # The real Fleet answers fleet.mowers.list to the gateway's and Telemetry's users,
    # on each asker's own inbox prefix.
    for asker in ("gateway", "telemetry"):
        bus = await Bus.connect(
            nats_bus.url,
            name=f"test-{asker}",
            credentials=nats_bus.credentials(asker),
            user=asker,
        )
        try:
            listed = await list_mowers(bus, MowerListRequest(), timeout=5)
            assert sorted(r.mower_id for r in listed) == sorted(running.mowers), asker
            assert bus.refused == 0
        finally:
            await bus.drain()
