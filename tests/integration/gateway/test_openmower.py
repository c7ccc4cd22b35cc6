"""A gateway shard links an OpenMower through Mosquitto: states on the bus, commands executed."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from nats.js import api

from contracts.v1 import (
    Connection,
    EmergencyStop,
    MowerRegistration,
    MowerState,
    SetBladeHeight,
    StartMow,
    decode_state,
)
from mowdeck.kit.bus import Bus
from simulator.openmower import ACTION_PAUSE, ACTION_START, StandInOpenMower
from tests.integration.gateway.conftest import (
    EventLog,
    ResultLog,
    command,
    running_gateway,
    settings_for,
    wait_connected,
)
from tests.support.eventually import eventually
from tests.support.mosquitto import Mosquitto

ACCOUNT = uuid.UUID("00000000-0000-4000-8000-00000000acc1")


async def test_an_openmower_through_the_gateway(  # noqa: PLR0917 - fixtures
    bus: Bus,
    nats_server: Any,
    broker: Mosquitto,
    openmower: StandInOpenMower,
    results: ResultLog,
    events: EventLog,
) -> None:
    reg = MowerRegistration(
        mower_id=uuid.uuid4(),
        account_id=ACCOUNT,
        name="om1",
        connection=Connection(
            kind="openmower",
            options={
                "broker": broker.url,
                "prefix": "yard/om1/",
                "datum": {"lat": 52.5, "lon": 13.4},
            },
        ),
    )
    states: list[MowerState] = []

    async def collect(msg: Any) -> None:
        states.append(decode_state(msg.data))

    sub = await bus.js.subscribe(
        f"telemetry.mower.{reg.mower_id}",
        stream="TELEMETRY",
        ordered_consumer=True,
        deliver_policy=api.DeliverPolicy.NEW,
        cb=collect,
    )
    try:
        async with running_gateway(settings_for(nats_server.url, [reg])) as gw:
            await wait_connected(gw, 1)
            await eventually(lambda: states)
            assert states[-1].activity == "charging"
            assert states[-1].position is not None
            assert round(states[-1].position.lat, 3) == 52.5
            await eventually(lambda: "mower.connected" in events.types(reg.mower_id))

            start = command(reg, StartMow())
            await bus.publish_command(start, now=datetime.now(UTC))
            final = await results.wait_final(start.command_id)
            assert final.status == "executed"
            assert list(openmower.actions_received) == [ACTION_START]
            await eventually(lambda: states[-1].activity == "mowing", 5)

            blade = command(reg, SetBladeHeight(height_mm=40))
            await bus.publish_command(blade, now=datetime.now(UTC))
            refused = await results.wait_final(blade.command_id)
            assert refused.status == "rejected"
            assert "set_blade_height is not offered by OpenMower" in (refused.reason or "")

            stop = command(reg, EmergencyStop(reason="test"))
            await bus.publish_command(stop, now=datetime.now(UTC))
            stopped = await results.wait_final(stop.command_id)
            assert stopped.status == "executed"
            assert openmower.actions_received[-1] == ACTION_PAUSE
            await eventually(lambda: states[-1].activity == "paused", 5)
    finally:
        await sub.unsubscribe()
