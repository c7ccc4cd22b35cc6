"""One link per device endpoint: a second registration of a device is refused and waits.

Two links to one simulated mower replace each other there (the newer closes the older
with 4001), and each side reconnects: the mower's link flaps for as long as both exist.
The simulator here counts the connections each mower's endpoint accepted.
"""

from __future__ import annotations

import collections
import uuid
from datetime import UTC, datetime

import msgspec
import pytest
import structlog

from contracts.v1 import Connection, EventEnvelope, MowerRegistration, SetBladeHeight
from mowdeck.kit.bus import Bus
from simulator import SimulatorServer
from simulator.fleet import Link
from tests.integration.gateway.conftest import (
    ResultLog,
    command,
    running_gateway,
    sentinel_command,
    settings_for,
    wait_connected,
)
from tests.support.eventually import eventually


class Dials:
    """The connections each simulated mower's endpoint accepted, and how many replaced one."""

    def __init__(self, sim: SimulatorServer) -> None:
        self.accepted: collections.Counter[uuid.UUID] = collections.Counter()
        self.replaced: collections.Counter[uuid.UUID] = collections.Counter()
        fleet, attach = sim.fleet, sim.fleet.attach

        def counted(i: int, link: Link) -> Link | None:
            old = attach(i, link)
            mower_id = fleet.mowers[i].mower_id
            self.accepted[mower_id] += 1
            self.replaced[mower_id] += old is not None
            return old

        # The simulator has no hook for this; its fleet is this test's own instance.
        fleet.attach = counted  # type: ignore[method-assign]


def _spelled_otherwise(registration: MowerRegistration) -> Connection:
    # The same device: the simulator reads the mower id in the path as a UUID, any case.
    url = registration.connection.options["url"]
    mower = str(registration.mower_id)
    return Connection(kind="simulator", options={"url": url.replace(mower, mower.upper())})


def _another_account(connection: Connection, name: str) -> MowerRegistration:
    return MowerRegistration(
        mower_id=uuid.uuid4(), account_id=uuid.uuid4(), name=name, connection=connection
    )


def _refusals(gateway: object) -> float:
    metrics = gateway.metrics  # type: ignore[attr-defined]
    return float(metrics.registrations_refused.labels(reason="endpoint_taken")._value.get())


async def test_a_second_registration_of_a_device_is_refused_and_never_dialled(
    bus: Bus, sim: SimulatorServer, results: ResultLog, nats_server
) -> None:  # type: ignore[no-untyped-def]
    real = sim.registrations()[0]
    alias = _another_account(_spelled_otherwise(real), "someone else's")
    dials = Dials(sim)
    with structlog.testing.capture_logs() as logs:
        async with running_gateway(settings_for(nats_server.url, [real, alias])) as gw:
            await wait_connected(gw, 1)
            # A command through the real link, after both registrations were applied: the
            # link is up and answering, and the device saw one connection, never replaced.
            await sentinel_command(bus, results, real)
            assert dials.accepted[real.mower_id] == 1
            assert dials.replaced[real.mower_id] == 0
            assert alias.mower_id not in gw.connections
            assert alias.mower_id not in gw.mowers
            assert _refusals(gw) == 1
            assert gw.metrics.registrations_waiting._value.get() == 1
    [refused] = [e for e in logs if e.get("reason") == "endpoint_taken"]
    assert (refused["event"], refused["log_level"]) == ("registration refused", "error")
    assert (refused["mower_id"], refused["holder"]) == (str(alias.mower_id), str(real.mower_id))


@pytest.mark.parametrize("holder_goes", ["removed", "moved"], ids=str)
async def test_a_refused_registration_takes_the_endpoint_its_holder_left(
    bus: Bus, sim: SimulatorServer, results: ResultLog, nats_server, holder_goes: str
) -> None:  # type: ignore[no-untyped-def]
    device = sim.registrations()[1]
    # A registration that names the device under another mower id holds it first; the
    # device's own (spelled otherwise) waits.
    wrong = _another_account(device.connection, "wrong")
    right = msgspec.structs.replace(device, connection=_spelled_otherwise(device))
    with structlog.testing.capture_logs() as logs:
        async with running_gateway(settings_for(nats_server.url, [wrong, right])) as gw:
            assert wrong.mower_id in gw.connections
            assert right.mower_id not in gw.connections
            assert _refusals(gw) == 1
            now = datetime.now(UTC)
            if holder_goes == "removed":
                event = EventEnvelope.new("mower.removed", wrong, producer="fleet", now=now)
            else:
                elsewhere = f"ws://127.0.0.1:{sim.port}/mowers/{uuid.uuid4()}/ws"
                moved = msgspec.structs.replace(
                    wrong, connection=Connection(kind="simulator", options={"url": elsewhere})
                )
                event = EventEnvelope.new("mower.updated", moved, producer="fleet", now=now)
            await bus.publish_event(event)
            await eventually(lambda: right.mower_id in gw.connections)
            await eventually(lambda: gw.connections[right.mower_id].connected)
            assert await _executed(bus, results, right) == "executed"
            assert gw.metrics.registrations_waiting._value.get() == 0
            assert (wrong.mower_id in gw.connections) is (holder_goes == "moved")
    taken = [e for e in logs if e["event"] == "registration takes a freed endpoint"]
    assert [(e["mower_id"], e["previous"]) for e in taken] == [
        (str(right.mower_id), str(wrong.mower_id))
    ]


async def _executed(bus: Bus, results: ResultLog, mower: MowerRegistration) -> str:
    env = command(mower, SetBladeHeight(height_mm=31))
    await bus.publish_command(env, now=datetime.now(UTC))
    return (await results.wait_final(env.command_id)).status
