"""Acknowledged on completion: progress while a device works, the in-flight bound, stops."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from contracts.v1 import CommandEnvelope, EmergencyStop, MowerRegistration, SetSpeed, encode
from contracts.v1.subjects import COMMANDS, PRIORITY_HEADER, command_subject
from mowdeck.kit.bus import Bus
from simulator import FleetConfig, LatencyFault, SimulatorServer
from tests.integration.gateway.conftest import (
    ACCOUNT,
    ResultLog,
    command,
    running_gateway,
    settings_for,
    wait_connected,
)
from tests.integration.gateway.processes import metric, ready, rss_mb, spawn_gateway
from tests.support.eventually import eventually
from tests.support.natsserver import NatsServer, free_port


async def test_a_command_running_longer_than_the_ack_wait_is_not_redelivered(
    bus: Bus, sim: SimulatorServer, results: ResultLog, nats_server: NatsServer
) -> None:
    mowers = sim.registrations()
    mower = mowers[0]
    await sim.inject(mower.mower_id, LatencyFault(ms=3500))
    settings = settings_for(nats_server.url, mowers, command_ack_wait_seconds=1.0)
    async with running_gateway(settings) as gw:
        await wait_connected(gw, len(mowers))
        env = command(mower, SetSpeed(speed_mps=0.4))
        await bus.publish_command(env, now=datetime.now(UTC))
        await eventually(lambda: env.command_id in gw.parts.held, timeout=5)
        final = await results.wait_final(env.command_id, timeout=10)
        assert final.status == "executed"
        # Reported in progress every third of the ack wait while the mower worked on it.
        assert gw.metrics.progress_acks._value.get() >= 3
        assert gw.metrics.redeliveries._value.get() == 0
        info = await bus.js.consumer_info(COMMANDS.name, gw.shard.durable)
        assert info.num_redelivered == 0
        await eventually(lambda: not gw.parts.held, timeout=5)
        assert sim.fleet.mower(mower.mower_id).frames()[env.command_id] == 1
    info = await bus.js.consumer_info(COMMANDS.name, "device-gateway-0")
    assert info.num_ack_pending == 0  # acknowledged once its result was stored


@contextlib.asynccontextmanager
async def _full_window(
    bus: Bus,
    sim: SimulatorServer,
    nats_server: NatsServer,
    *,
    window: int,
    load: int,
    device_ms: int,
) -> AsyncIterator[tuple[Any, MowerRegistration, list[CommandEnvelope]]]:
    """A gateway whose in-flight window of ``window`` is full of ``load`` slow commands
    (``device_ms`` each) for three mowers; yields it, a fourth (idle) mower and the load."""
    mowers = sim.registrations()
    target, others = mowers[0], mowers[1:]
    for m in others:
        await sim.inject(m.mower_id, LatencyFault(ms=device_ms))
    settings = settings_for(
        nats_server.url, mowers, gateway_max_in_flight=window, command_ack_wait_seconds=3.0
    )
    async with running_gateway(settings) as gw:
        await wait_connected(gw, len(mowers))
        envs = [command(others[i % 3], SetSpeed(speed_mps=0.3), ttl_s=60) for i in range(load)]
        for env in envs:
            await bus.publish_command(env, now=datetime.now(UTC))
        await eventually(lambda: len(gw.parts.held) == window, timeout=5)
        yield gw, target, envs


async def test_a_stop_overtakes_a_full_in_flight_window(
    bus: Bus, sim: SimulatorServer, results: ResultLog, nats_server: NatsServer
) -> None:
    async with _full_window(bus, sim, nats_server, window=20, load=60, device_ms=3000) as (
        gw,
        target,
        load,
    ):
        # The window is full (20 held); the other 40 wait in the stream, not in the process.
        await eventually(lambda: gw.metrics.waiting_in_stream._value.get() >= 30, timeout=5)
        stop = command(target, EmergencyStop(reason="test"))
        t0 = time.monotonic()
        await bus.publish_command(stop, now=datetime.now(UTC))
        assert (await results.wait_final(stop.command_id, timeout=2)).status == "executed"
        elapsed = time.monotonic() - t0
        assert elapsed < 0.5, elapsed  # the window frees in 3 s at the earliest
        assert len(gw.parts.held) >= 19  # the load still holds it
        assert all(results.final(e.command_id) is None for e in load[:3])


async def test_a_stop_never_announced_is_still_executed_when_the_stream_delivers_it(
    bus: Bus, sim: SimulatorServer, results: ResultLog, nats_server: NatsServer
) -> None:
    # A publisher that only stores the stop (not the kit's, which announces it on
    # emergency.mower.<id> first): the lane never sees it, and its stream copy waits its
    # turn behind the full window like any delivery, then stops the mower.
    async with _full_window(bus, sim, nats_server, window=6, load=6, device_ms=1500) as (
        _,
        target,
        load,
    ):
        stop = command(target, EmergencyStop(reason="stored only"))
        await bus.publish(
            command_subject(stop.mower_id),
            encode(stop),
            msg_id=str(stop.command_id),
            headers={PRIORITY_HEADER: "emergency"},
        )
        assert (await results.wait_final(stop.command_id, timeout=10)).status == "executed"
        # Delivered only once the window had room: after the first of the load answered.
        load_ids = {e.command_id for e in load}
        order = [r.command_id for r in results.results if r.is_final]
        assert any(c in load_ids for c in order[: order.index(stop.command_id)])
        assert Counter(sim.fleet.mower(target.mower_id).frames())[stop.command_id] == 1


@pytest.mark.slow
async def test_the_in_flight_bound_holds_under_a_burst_of_20000_commands(
    bus: Bus, results: ResultLog, nats_server: NatsServer, tmp_path: Path
) -> None:
    # Fifty mowers of 20 ms each take about 2,500 commands a second: the burst, published
    # several times faster, waits in the stream while the shard holds at most its bound.
    sim = SimulatorServer(FleetConfig(mowers=50, seed=3, speed=20.0, account_id=ACCOUNT))
    await sim.start()
    try:
        mowers = sim.registrations()
        for m in mowers:
            await sim.inject(m.mower_id, LatencyFault(ms=20))
        bound = 2000
        port = free_port()
        proc = spawn_gateway(
            nats_server.url,
            msgspec.json.encode(mowers).decode(),
            port,
            tmp_path / "gateway.log",
            MOWDECK_GATEWAY_MAX_IN_FLIGHT=str(bound),
            MOWDECK_COMMAND_ACK_WAIT_SECONDS="3",
            MOWDECK_LOG_LEVEL="warning",
        )
        try:
            await eventually(lambda: ready(port), timeout=30)
            await eventually(
                lambda: _at_least(port, "mowdeck_gateway_mowers_connected", 50), timeout=30
            )
            envs = [
                command(mowers[i % 50], SetSpeed(speed_mps=0.2 + i % 10 / 10), ttl_s=300)
                for i in range(20_000)
            ]
            # A first thousand: the process's memory with work in flight.
            for env in envs[:1000]:
                await bus.publish_nowait(
                    f"command.mower.{env.mower_id}",
                    msgspec.json.encode(env),
                    msg_id=str(env.command_id),
                )
            await eventually(lambda: _done(results, envs[:1000]), timeout=30)
            before = rss_mb(proc.pid)
            samples: list[tuple[float, float, float]] = []
            stop_sampling = asyncio.Event()

            async def sample() -> None:
                while not stop_sampling.is_set():
                    held = await metric(port, "mowdeck_gateway_commands_in_flight")
                    waiting = await metric(port, "mowdeck_gateway_commands_waiting")
                    samples.append((held, waiting, rss_mb(proc.pid)))
                    await asyncio.sleep(0.1)

            sampler = asyncio.create_task(sample())
            acks = [
                await bus.publish_nowait(
                    f"command.mower.{env.mower_id}",
                    msgspec.json.encode(env),
                    msg_id=str(env.command_id),
                )
                for env in envs[1000:]
            ]
            await asyncio.gather(*acks)
            await eventually(lambda: _done(results, envs), timeout=120)
            stop_sampling.set()
            await sampler
            peak_held = max(s[0] for s in samples)
            peak_waiting = max(s[1] for s in samples)
            peak_rss = max(s[2] for s in samples)
            print(
                f"held at most {peak_held:.0f}, waiting in the stream at most "
                f"{peak_waiting:.0f}, RSS {before:.1f} MB before, {peak_rss:.1f} MB at most"
            )
            assert peak_held <= bound
            assert peak_waiting > 5000  # the burst waited in JetStream
            assert peak_rss - before < 25, (before, peak_rss)
        finally:
            proc.send_signal(signal.SIGTERM)
            assert await asyncio.to_thread(proc.wait, 60) == 0
    finally:
        await sim.stop()


async def _publish(bus: Bus, env: CommandEnvelope) -> Any:
    """Many in flight: returns the future of the stream's ack."""
    return await bus.publish_nowait(
        command_subject(env.mower_id),
        encode(env),
        msg_id=str(env.command_id),
        headers={PRIORITY_HEADER: "normal"},
    )


def _done(results: ResultLog, envs: list) -> bool:  # type: ignore[type-arg]
    finals = {r.command_id for r in results.results if r.is_final}
    return all(e.command_id in finals for e in envs)


async def _at_least(port: int, name: str, value: float) -> bool:
    try:
        return await metric(port, name) >= value
    except Exception:
        return False
