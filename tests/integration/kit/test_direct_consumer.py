"""``DirectConsumer``: a durable's deliveries read on the connection's read loop.

Each test runs on the fast client (the direct path) and on nats-py's stock client (where
it is an ordinary ``Consumer``): the same deliveries, settlements and queue group.
"""

from __future__ import annotations

import uuid

import pytest
from nats.aio.msg import Msg

from mowdeck.kit import wire
from mowdeck.kit.bus import Bus
from mowdeck.kit.consumer import Consumer, ConsumerSpec, DirectConsumer
from tests.support.eventually import eventually
from tests.support.jetstream import unsettled


@pytest.fixture(params=[True, False], ids=["fast-client", "stock-client"])
def nats_fast_path(request: pytest.FixtureRequest) -> bool:
    """The ``bus`` fixture on either client."""
    return bool(request.param)


def _subject(n: int) -> str:
    return f"telemetry.mower.{uuid.UUID(int=n + 1)}"


def _spec(durable: str, *, queue: str | None = None) -> ConsumerSpec:
    return ConsumerSpec(
        stream="TELEMETRY", subject="telemetry.>", durable=durable, queue=queue, ack_wait=30
    )


async def _publish(bus: Bus, count: int, prefix: str, start: int = 0) -> None:
    for n in range(start, start + count):
        await bus.publish(_subject(n), f"{n}".encode(), msg_id=f"{prefix}-{n}", headers={"X": "1"})


async def test_deliveries_arrive_in_order_and_are_settled_by_the_caller(bus: Bus) -> None:
    await _publish(bus, 40, "order")
    got: list[Msg] = []
    consumer = DirectConsumer(bus, _spec("direct-order"), got.append)
    await consumer.start()
    try:
        assert consumer.alive
        await eventually(lambda: len(got) == 40)
        assert [m.data for m in got] == [f"{n}".encode() for n in range(40)]
        assert [m.subject for m in got] == [_subject(n) for n in range(40)]
        assert [m.metadata.sequence.stream for m in got] == list(range(1, 41))
        assert got[0].headers == {"Nats-Msg-Id": "order-0", "X": "1"}
        # Nothing is settled until the caller settles it.
        assert (await unsettled(bus, "TELEMETRY", "direct-order", until=(0, 40)))[1] == 40
        await wire.ack_all(got[:30])
        await got[30].nak()
        await bus.nc.flush()
        # The nak'd one comes back; the acknowledged ones do not.
        await eventually(lambda: len(got) == 41)
        assert got[40].data == got[30].data
        assert got[40].metadata.num_delivered == 2
        await wire.ack_all(got[31:])
        await bus.nc.flush()
        assert (await unsettled(bus, "TELEMETRY", "direct-order", until=(0, 40)))[1] == 0
    finally:
        await consumer.stop()
    assert not consumer.alive


async def test_two_replicas_of_a_queue_group_share_every_delivery_once(bus: Bus) -> None:
    first: list[Msg] = []
    second: list[Msg] = []
    a = DirectConsumer(bus, _spec("direct-group", queue="direct-group"), first.append)
    b = DirectConsumer(bus, _spec("direct-group", queue="direct-group"), second.append)
    await a.start()
    await b.start()
    try:
        await _publish(bus, 300, "group")
        await eventually(lambda: len(first) + len(second) >= 300)
        await wire.ack_all(first)
        await wire.ack_all(second)
        await bus.nc.flush()
        # Sentinel: every delivery is acknowledged, so nothing more can arrive; one more
        # message arrives exactly once, behind anything that was still on its way.
        await _publish(bus, 1, "group", start=300)
        await eventually(lambda: len(first) + len(second) == 301)
        data = sorted(int(m.data) for m in first + second)
        assert data == list(range(301))  # each exactly once
        if wire.is_fast(bus.nc):  # the stock client's pace may leave one replica idle
            assert first and second
    finally:
        await a.stop()
        await b.stop()


async def test_a_direct_replica_joins_a_durable_an_ordinary_consumer_made(bus: Bus) -> None:
    """A rolling upgrade: replicas of both kinds share one durable and deliver subject."""
    old: list[Msg] = []

    async def keep(msg: Msg) -> None:
        old.append(msg)

    ordinary = Consumer(bus, _spec("direct-mixed", queue="direct-mixed"), keep)
    await ordinary.start()
    new: list[Msg] = []
    direct = DirectConsumer(bus, _spec("direct-mixed", queue="direct-mixed"), new.append)
    await direct.start()
    try:
        info = await bus.js.consumer_info("TELEMETRY", "direct-mixed")
        assert info.config.deliver_subject  # one push consumer, both subscribed to it
        await _publish(bus, 200, "mixed")
        await eventually(lambda: len(old) + len(new) == 200)
        assert sorted(int(m.data) for m in old + new) == list(range(200))
        await wire.ack_all(old)
        await wire.ack_all(new)
    finally:
        await direct.stop()
        await ordinary.stop()


async def test_deliveries_arriving_while_it_stops_are_given_back(bus: Bus) -> None:
    """What reaches a stopping consumer is nak'd: the next start gets it at once, not after
    the ack wait (30 s here)."""
    got: list[Msg] = []
    consumer = DirectConsumer(bus, _spec("direct-stop"), got.append)
    await consumer.start()
    await _publish(bus, 10, "stop")
    await eventually(lambda: len(got) == 10)
    await wire.ack_all(got)
    consumer._closing = True  # as stop() begins; these arrive before its drain
    await _publish(bus, 5, "stop", start=10)
    # Delivered by the server (pending acknowledgement): they reach the stopping consumer.
    assert (await unsettled(bus, "TELEMETRY", "direct-stop", until=(0, 5))) == (0, 5)
    await consumer.stop()
    assert len(got) == 10  # none of the five was handed over while stopping
    later: list[Msg] = []
    again = DirectConsumer(bus, _spec("direct-stop"), later.append)
    await again.start()
    try:
        await eventually(lambda: len(later) == 5, timeout=10)
        assert sorted(int(m.data) for m in later) == list(range(10, 15))
        await wire.ack_all(later)
    finally:
        await again.stop()
