"""A shard that starts reads the final results stored since its durable's ack floor.

Not only while deliveries wait for their acknowledgement: a durable that stood still
(its shard index unused while the shard count was lower) has a backlog no process of it
ever saw, whose commands the other shards answered meanwhile. Replayed without their
results known, each would be answered a second time (``expired``), a second and different
final status. Found by the chaos run's shard-count changes (docs/reliability.md).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from nats.js import api

from contracts.v1 import (
    CommandResult,
    Connection,
    EmergencyStop,
    MowerRegistration,
    SetSpeed,
)
from mowdeck.gateway.deliveries import FinalOutcomes
from mowdeck.gateway.outcomes import read_stored_finals
from mowdeck.kit.bus import Bus
from simulator import SimulatorServer
from tests.integration.gateway.conftest import (
    ResultLog,
    command,
    running_gateway,
    sentinel_command,
    settings_for,
    wait_connected,
)

MOWER = MowerRegistration(
    mower_id=uuid.uuid4(),
    account_id=uuid.uuid4(),
    name="m",
    connection=Connection(kind="simulator"),
)


async def test_a_durable_that_stood_still_learns_the_results_of_its_backlog(bus: Bus) -> None:
    await bus.js.add_consumer(
        "COMMANDS",
        api.ConsumerConfig(
            durable_name="device-gateway-2",
            deliver_policy=api.DeliverPolicy.NEW,
            ack_policy=api.AckPolicy.EXPLICIT,
            filter_subject="command.mower.*",
        ),
    )
    answered, open_ = (command(MOWER, SetSpeed(speed_mps=0.5)) for _ in range(2))
    for env in (answered, open_):
        await bus.publish_command(env, now=datetime.now(UTC))
    await bus.publish_result(
        CommandResult(
            command_id=answered.command_id,
            mower_id=MOWER.mower_id,
            status="executed",
            at=datetime.now(UTC),
        )
    )
    info = await bus.js.consumer_info("COMMANDS", "device-gateway-2")
    assert (info.num_pending, info.num_ack_pending) == (2, 0)  # a backlog, none delivered
    finals = FinalOutcomes()
    read = await read_stored_finals(
        bus.js, stream="COMMANDS", durable="device-gateway-2", finals=finals
    )
    assert read == 1
    assert answered.command_id in finals
    assert open_.command_id not in finals


async def test_a_stop_the_process_before_answered_is_not_sent_again_by_the_next(
    bus: Bus,
    sim: SimulatorServer,
    results: ResultLog,
    nats_server,  # type: ignore[no-untyped-def]
) -> None:
    # The process before sent the stop by its lane and stored its result, then stopped
    # before the stream delivered the stop's copy (a change of the shard count). The next
    # process must not send it again: a stop with two final statuses (found by the chaos
    # run: "failed: link down" from the one, "executed" from the other).
    mowers = sim.registrations()
    mower = mowers[0]
    settings = settings_for(nats_server.url, mowers)
    async with running_gateway(settings) as gw:  # its durable exists from here on
        await wait_connected(gw, len(mowers))
    stop = command(mower, EmergencyStop(reason="test"))
    await bus.publish_command(stop, now=datetime.now(UTC))
    await bus.publish_result(
        CommandResult(
            command_id=stop.command_id,
            mower_id=mower.mower_id,
            status="failed",
            reason="link down: test",
            at=datetime.now(UTC),
        )
    )
    async with running_gateway(settings) as gw:
        await wait_connected(gw, len(mowers))
        await sentinel_command(bus, results, mower)
    assert results.of(stop.command_id) == ["failed"]
    assert stop.command_id not in sim.fleet.mower(mower.mower_id).frames()
