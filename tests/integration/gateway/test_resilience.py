"""NATS restarts and SIGTERM under load: no admitted command lost or executed twice."""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import msgspec
import pytest

from contracts.v1 import CommandEnvelope, SetBladeHeight, SetSpeed
from mowdeck.kit.bus import Bus
from simulator import LatencyFault, SimulatorServer
from tests.integration.gateway.conftest import (
    ResultLog,
    command,
    running_gateway,
    settings_for,
    wait_connected,
)
from tests.integration.gateway.processes import metric, ready, spawn_gateway
from tests.support.eventually import eventually
from tests.support.natsserver import NatsServer, free_port
from tests.support.settings import fast_path_from_environment


async def publish_reliably(bus: Bus, env: CommandEnvelope) -> None:
    """Publish until JetStream acknowledges; the msg id makes repeats harmless."""
    for _ in range(200):
        try:
            await bus.publish_command(env, now=datetime.now(UTC))
            return
        except Exception:
            await asyncio.sleep(0.05)
    raise AssertionError("could not publish")


def executions(sim: SimulatorServer, mowers: list[uuid.UUID]) -> Counter[uuid.UUID]:
    return Counter(
        r.command_id
        for m in mowers
        for r in sim.fleet.mower(m).commands or []
        if r.status == "executed"
    )


def sent_frames(sim: SimulatorServer, mowers: list[uuid.UUID]) -> Counter[uuid.UUID]:
    """The command frames each mower was sent, per command id, repeats included."""
    sent: Counter[uuid.UUID] = Counter()
    for m in mowers:
        sent.update(sim.fleet.mower(m).frames())
    return sent


@pytest.mark.slow
async def test_nats_restart_under_load(own_nats_server: NatsServer, sim: SimulatorServer) -> None:
    mowers = sim.registrations()
    bus = await Bus.connect(
        own_nats_server.url, name="test", fast_path=fast_path_from_environment()
    )
    await bus.ensure_streams()
    log = ResultLog(bus)
    await log.start()
    try:
        async with running_gateway(settings_for(own_nats_server.url, mowers)) as gw:
            await wait_connected(gw, len(mowers))
            envs = [
                command(mowers[i % len(mowers)], SetBladeHeight(height_mm=20 + i % 80), ttl_s=120)
                for i in range(300)
            ]

            async def load() -> None:
                for env in envs:
                    await publish_reliably(bus, env)
                    await asyncio.sleep(0.004)

            loader = asyncio.create_task(load())
            await asyncio.sleep(0.4)
            await asyncio.to_thread(own_nats_server.restart, 0.5)
            await loader
            for env in envs:
                final = await log.wait_final(env.command_id, timeout=30)
                assert final.status == "executed", final
            counts = executions(sim, [m.mower_id for m in mowers])
            assert all(counts[e.command_id] == 1 for e in envs)
            per_status = Counter((r.command_id, r.status) for r in log.results)
            assert max(per_status.values()) == 1
            # A delivery redelivered after a lost ack was held or answered: never resent.
            sent = sent_frames(sim, [m.mower_id for m in mowers])
            assert all(sent[e.command_id] == 1 for e in envs)
    finally:
        await log.stop()
        await bus.drain()


@pytest.mark.slow
async def test_sigterm_under_load(
    bus: Bus, sim: SimulatorServer, results: ResultLog, nats_server: NatsServer, tmp_path: Path
) -> None:
    log = tmp_path / "gateway.log"
    mowers = sim.registrations()
    for m in mowers:
        await sim.inject(m.mower_id, LatencyFault(ms=100))
    mowers_json = msgspec.json.encode(mowers).decode()
    port = free_port()
    proc = spawn_gateway(nats_server.url, mowers_json, port, log)
    try:
        # A shard's consumer, created at its first start, takes what is published after.
        await eventually(lambda: ready(port), timeout=30)
        first = [command(mowers[i % 4], SetSpeed(speed_mps=0.5), ttl_s=120) for i in range(40)]
        for env in first:
            await bus.publish_command(env, now=datetime.now(UTC))
        # Wait until the gateway works through the queue, then stop it mid-way.
        await eventually(
            lambda: len([e for e in first if results.final(e.command_id)]) >= 4, timeout=20
        )
        proc.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.05)
        late = [command(mowers[i % 4], SetSpeed(speed_mps=0.7), ttl_s=120) for i in range(20)]
        for env in late:
            await bus.publish_command(env, now=datetime.now(UTC))
        code = await asyncio.to_thread(proc.wait, 60)
        assert code == 0, log.read_text()[-2000:]
        # Every command the gateway accepted got its final result before it exited.
        accepted = {r.command_id for r in results.results if r.status == "accepted"}
        assert accepted
        assert all(results.final(c) is not None for c in accepted)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # What it did not accept runs after the restart; nothing runs twice.
    proc = spawn_gateway(nats_server.url, mowers_json, free_port(), log)
    try:
        for env in first + late:
            assert (await results.wait_final(env.command_id, timeout=40)).status == "executed"
        counts = executions(sim, [m.mower_id for m in mowers])
        assert all(counts[e.command_id] == 1 for e in first + late)
        per_status = Counter((r.command_id, r.status) for r in results.results)
        assert max(per_status.values()) == 1
        # One final status each, and each command was sent to its mower once: what the
        # first process had sent it answered before exiting; the rest it gave back.
        finals = Counter(r.command_id for r in results.results if r.is_final)
        assert all(finals[e.command_id] == 1 for e in first + late)
        sent = sent_frames(sim, [m.mower_id for m in mowers])
        assert all(sent[e.command_id] == 1 for e in first + late)
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.to_thread(proc.wait, 60)


@pytest.mark.slow
async def test_two_shard_processes_split_the_fleet_exactly(
    bus: Bus, sim: SimulatorServer, results: ResultLog, nats_server: NatsServer, tmp_path: Path
) -> None:
    mowers = sim.registrations()
    mowers_json = msgspec.json.encode(mowers).decode()
    ports = [free_port(), free_port()]
    procs = [
        spawn_gateway(nats_server.url, mowers_json, ports[i], tmp_path / f"g{i}.log", (i, 2))
        for i in range(2)
    ]
    try:
        for i, port in enumerate(ports):
            owned = sum(1 for m in mowers if m.mower_id.int % 2 == i)

            async def connected(port: int = port, owned: int = owned) -> bool:
                try:
                    return await metric(port, "mowdeck_gateway_mowers_connected") >= owned
                except aiohttp.ClientError:
                    return False

            await eventually(connected, timeout=30)
        envs = [
            command(m, SetSpeed(speed_mps=0.3 + i / 10), ttl_s=60) for i in range(5) for m in mowers
        ]
        for env in envs:
            await bus.publish_command(env, now=datetime.now(UTC))
        for env in envs:
            assert (await results.wait_final(env.command_id, timeout=30)).status == "executed"
        counts = executions(sim, [m.mower_id for m in mowers])
        assert all(counts[e.command_id] == 1 for e in envs)
        # Each process admitted exactly the commands of its own mowers.
        for i, port in enumerate(ports):
            mine = sum(1 for e in envs if e.mower_id.int % 2 == i)
            admitted = await metric(port, "mowdeck_gateway_commands_admitted_total")
            foreign = await metric(port, "mowdeck_gateway_commands_foreign_total")
            assert (admitted, foreign) == (mine, len(envs) - mine)
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            assert await asyncio.to_thread(proc.wait, 60) == 0
