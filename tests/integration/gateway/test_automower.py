"""A gateway shard links two Automowers of one account through a stand-in Automower
Connect cloud: states on the bus, commands executed, rejected and stopped."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from nats.js import api

from contracts.v1 import (
    Connection,
    EmergencyStop,
    MowerRegistration,
    MowerState,
    SetSpeed,
    StartMow,
    decode_state,
)
from mowdeck.kit.bus import Bus
from simulator.automower.standin import StandInCloud, StandInMower
from tests.integration.gateway.conftest import (
    EventLog,
    ResultLog,
    command,
    running_gateway,
    settings_for,
    wait_connected,
)
from tests.support.eventually import eventually

ACCOUNT = uuid.UUID("00000000-0000-4000-8000-00000000acc1")


@pytest.fixture
async def cloud() -> AsyncIterator[StandInCloud]:
    c = StandInCloud({"app-1": "s3cret"}, rate=20.0)
    c.add(StandInMower("mower-a"))
    c.add(StandInMower("mower-b"))
    await c.start()
    yield c
    await c.stop()


def registration(vendor_id: str) -> MowerRegistration:
    return MowerRegistration(
        mower_id=uuid.uuid4(),
        account_id=ACCOUNT,
        name=vendor_id,
        connection=Connection(
            kind="automower", options={"vendor_id": vendor_id, "credentials": "husq"}
        ),
    )


async def test_two_automowers_of_one_account_through_the_gateway(  # noqa: PLR0917 - fixtures
    bus: Bus,
    nats_server: Any,
    cloud: StandInCloud,
    results: ResultLog,
    events: EventLog,
    tmp_path: Path,
) -> None:
    (tmp_path / "husq.json").write_text(
        json.dumps({"client_id": "app-1", "client_secret": "s3cret"})
    )
    a, b = registration("mower-a"), registration("mower-b")
    states: list[MowerState] = []

    async def collect(msg: Any) -> None:
        states.append(decode_state(msg.data))

    sub = await bus.js.subscribe(
        f"telemetry.mower.{a.mower_id}",
        stream="TELEMETRY",
        ordered_consumer=True,
        deliver_policy=api.DeliverPolicy.NEW,
        cb=collect,
    )
    endpoints = cloud.endpoints
    settings = settings_for(
        nats_server.url,
        [a, b],
        gateway_credentials_dir=str(tmp_path),
        automower_token_url=endpoints["token_url"],
        automower_api_url=endpoints["api_url"],
        automower_ws_url=endpoints["ws_url"],
    )
    try:
        async with running_gateway(settings) as gw:
            await wait_connected(gw, 2)
            await eventually(lambda: states)
            assert states[-1].activity == "docked"
            assert states[-1].connection == "automower-cloud"
            await eventually(lambda: "mower.connected" in events.types(b.mower_id))
            assert cloud.token_requests == 1
            assert cloud.open_sockets == 1

            start = command(a, StartMow(duration_min=60))
            await bus.publish_command(start, now=datetime.now(UTC))
            assert (await results.wait_final(start.command_id)).status == "executed"
            assert cloud.mowers["mower-a"].commands == [
                {"type": "Start", "attributes": {"duration": 60}}
            ]
            await eventually(lambda: states[-1].activity == "mowing", 5)

            speed = command(a, SetSpeed(speed_mps=0.5))
            await bus.publish_command(speed, now=datetime.now(UTC))
            refused = await results.wait_final(speed.command_id)
            assert refused.status == "rejected"
            assert "set_speed is not offered by Husqvarna's Automower Connect API" in (
                refused.reason or ""
            )

            stop = command(a, EmergencyStop(reason="test"))
            await bus.publish_command(stop, now=datetime.now(UTC))
            assert (await results.wait_final(stop.command_id)).status == "executed"
            assert cloud.mowers["mower-a"].commands[-1] == {"type": "Pause"}
            await eventually(lambda: states[-1].activity == "paused", 5)
            assert cloud.mowers["mower-b"].commands == []
    finally:
        await sub.unsubscribe()
