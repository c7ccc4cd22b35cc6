"""Registry from Fleet, sharding, telemetry and device links through a real gateway."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import msgspec
from nats.js import api

from contracts.v1 import (
    EventEnvelope,
    ManualDrive,
    MowerListReply,
    MowerListRequest,
    SetBladeHeight,
    decode,
    decode_state,
    encode,
)
from contracts.v1.subjects import FLEET_MOWERS_LIST
from mowdeck.kit.bus import Bus
from simulator import LinkLossFault, SimulatorServer
from tests.integration.gateway.conftest import (
    EventLog,
    ResultLog,
    command,
    running_gateway,
    settings_for,
    wait_connected,
)
from tests.support.eventually import eventually


async def test_two_shards_split_the_fleet_and_execute_each_command_once(
    bus: Bus, sim: SimulatorServer, results: ResultLog, nats_server
) -> None:  # type: ignore[no-untyped-def]
    mowers = sim.registrations()
    s0 = settings_for(nats_server.url, mowers, shard_index=0, shard_count=2)
    s1 = settings_for(nats_server.url, mowers, shard_index=1, shard_count=2)
    async with running_gateway(s0) as g0, running_gateway(s1) as g1:
        assert set(g0.mowers) | set(g1.mowers) == {m.mower_id for m in mowers}
        assert not set(g0.mowers) & set(g1.mowers)
        await wait_connected(g0, len(g0.mowers))
        await wait_connected(g1, len(g1.mowers))
        envs = [command(m, SetBladeHeight(height_mm=20 + i)) for i in range(5) for m in mowers]
        await asyncio.gather(*(bus.publish_command(e, now=datetime.now(UTC)) for e in envs))
        for env in envs:
            assert (await results.wait_final(env.command_id)).status == "executed"
        for m in mowers:
            got = [r.command_id for r in sim.fleet.mower(m.mower_id).commands or []]
            assert sorted(got) == sorted(e.command_id for e in envs if e.mower_id == m.mower_id)
        admitted = sum(g.metrics.admitted.labels("set_blade_height")._value.get() for g in (g0, g1))
        assert admitted == len(envs)


async def test_fleet_absent_at_start_then_arriving(
    bus: Bus, sim: SimulatorServer, results: ResultLog, nats_server
) -> None:  # type: ignore[no-untyped-def]
    mowers = sim.registrations()
    bootstrap, later = mowers[:1], mowers[1:]
    async with running_gateway(settings_for(nats_server.url, bootstrap)) as gw:
        # Ready with the bootstrap mower while Fleet does not answer.
        await wait_connected(gw, 1)
        assert gw.readiness.ready
        await eventually(lambda: gw.metrics.fleet_retries._value.get() >= 3)
        env = command(bootstrap[0], SetBladeHeight(height_mm=33))
        await bus.publish_command(env, now=datetime.now(UTC))
        assert (await results.wait_final(env.command_id)).status == "executed"

        asked: list[MowerListRequest] = []

        async def fleet(msg: Any) -> None:
            request = decode(msg.data, MowerListRequest)
            asked.append(request)
            await msg.respond(
                encode(MowerListReply(mowers=[m for m in mowers if request.owns(m.mower_id)]))
            )

        sub = await bus.nc.subscribe(FLEET_MOWERS_LIST, cb=fleet)
        try:
            await eventually(lambda: len(gw.mowers) == len(mowers), timeout=5)
            assert asked[0] == MowerListRequest(shard_index=0, shard_count=1)
            await wait_connected(gw, len(mowers))
            env = command(later[-1], SetBladeHeight(height_mm=44))
            await bus.publish_command(env, now=datetime.now(UTC))
            assert (await results.wait_final(env.command_id)).status == "executed"
        finally:
            await sub.unsubscribe()


async def test_registry_events_add_rename_reconnect_and_remove(
    bus: Bus, sim: SimulatorServer, events: EventLog, nats_server
) -> None:  # type: ignore[no-untyped-def]
    mowers = sim.registrations()
    first, second = mowers[0], mowers[1]
    async with running_gateway(settings_for(nats_server.url, [first])) as gw:
        await wait_connected(gw, 1)
        now = datetime.now(UTC)
        await bus.publish_event(
            EventEnvelope.new(
                "mower.registered", second, producer="fleet", now=now, account_id=second.account_id
            )
        )
        await eventually(lambda: second.mower_id in gw.mowers)
        await wait_connected(gw, 2)
        renamed = msgspec.structs.replace(second, name="Renamed")
        await bus.publish_event(
            EventEnvelope.new("mower.updated", renamed, producer="fleet", now=now)
        )
        await eventually(lambda: gw.mowers[second.mower_id].name == "Renamed")
        old_conn = gw.connections[second.mower_id]
        moved = msgspec.structs.replace(
            renamed,
            connection=msgspec.structs.replace(
                renamed.connection, options={**renamed.connection.options, "note": "moved"}
            ),
        )
        await bus.publish_event(
            EventEnvelope.new("mower.updated", moved, producer="fleet", now=now)
        )
        await eventually(lambda: gw.connections.get(second.mower_id) not in (None, old_conn))
        await wait_connected(gw, 2)
        await bus.publish_event(
            EventEnvelope.new("mower.removed", moved, producer="fleet", now=now)
        )
        await eventually(lambda: second.mower_id not in gw.mowers)
        assert second.mower_id not in gw.connections
        await eventually(lambda: events.types(second.mower_id)[-1:] == ["mower.disconnected"])
        assert "mower.connected" in events.types(second.mower_id)


async def test_link_drop_and_return_and_telemetry(
    bus: Bus, sim: SimulatorServer, events: EventLog, nats_server
) -> None:  # type: ignore[no-untyped-def]
    mowers = sim.registrations()
    mower = mowers[0]
    states: list[Any] = []

    async def collect(msg: Any) -> None:
        states.append(decode_state(msg.data))

    sub = await bus.js.subscribe(
        f"telemetry.mower.{mower.mower_id}",
        stream="TELEMETRY",
        ordered_consumer=True,
        deliver_policy=api.DeliverPolicy.NEW,
        cb=collect,
    )
    settings = settings_for(nats_server.url, mowers, state_heartbeat_seconds=0.3)
    try:
        async with running_gateway(settings) as gw:
            await wait_connected(gw, len(mowers))
            await eventually(lambda: len(states) >= 3)
            assert gw.metrics.heartbeats._value.get() > 0
            await sim.inject(mower.mower_id, LinkLossFault(seconds=1.0))
            await eventually(lambda: "mower.disconnected" in events.types(mower.mower_id))
            before = len(states)
            await eventually(
                lambda: events.types(mower.mower_id)[-1:] == ["mower.connected"], timeout=15
            )
            # States flow again after the link returned.
            await eventually(lambda: len(states) > before + 1)
            assert all(s.mower_id == mower.mower_id for s in states)
            assert all(s.account_id == mower.account_id for s in states)
            types = events.types(mower.mower_id)
            assert types.index("mower.connected") < types.index("mower.disconnected")
    finally:
        await sub.unsubscribe()


async def test_gateway_ends_a_manual_drive_itself(
    bus: Bus, sim: SimulatorServer, results: ResultLog, nats_server
) -> None:  # type: ignore[no-untyped-def]
    mowers = sim.registrations()
    mower = mowers[0]
    async with running_gateway(settings_for(nats_server.url, mowers)) as gw:
        await wait_connected(gw, len(mowers))
        drive = command(mower, ManualDrive(linear_mps=0.5, angular_rps=0.0, ttl_ms=300))
        await bus.publish_command(drive, now=datetime.now(UTC))
        assert (await results.wait_final(drive.command_id)).status == "executed"
        # The gateway sends its own zero-velocity drive once ttl_ms passed without another.
        await eventually(
            lambda: len(sim.fleet.mower(mower.mower_id).commands or []) >= 2, timeout=3
        )
        records = list(sim.fleet.mower(mower.mower_id).commands or [])
        assert records[0].command_id == drive.command_id
        assert records[1].kind == "manual_drive"
        assert records[1].command_id != drive.command_id
