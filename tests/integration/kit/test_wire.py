"""The lean client against a real JetStream: deliveries with headers, acks written in bulk."""

from __future__ import annotations

import asyncio

import pytest
from nats.aio.msg import Msg
from nats.errors import MsgAlreadyAckdError, NotJSMessageError

from mowdeck.kit import wire
from mowdeck.kit.bus import Bus
from mowdeck.kit.consumer import Consumer, ConsumerSpec
from tests.support.jetstream import unsettled

SUBJECT = "telemetry.mower.00000000-0000-4000-8000-000000000042"


async def _receive(bus: Bus, durable: str, count: int) -> tuple[Consumer, list[Msg]]:
    got: list[Msg] = []
    arrived = asyncio.Event()

    async def keep(msg: Msg) -> None:
        got.append(msg)
        if len(got) == count:
            arrived.set()

    consumer = Consumer(
        bus, ConsumerSpec(stream="TELEMETRY", subject="telemetry.>", durable=durable), keep
    )
    await consumer.start()
    await asyncio.wait_for(arrived.wait(), 5)
    return consumer, got


async def _unacked(bus: Bus, durable: str, expect: int | None = None) -> int:
    until = None if expect is None else (0, expect)  # every message delivered by then
    return (await unsettled(bus, "TELEMETRY", durable, until=until))[1]


async def test_the_bus_uses_the_lean_client(bus: Bus) -> None:
    assert isinstance(bus.nc, wire.Client)
    assert isinstance(bus.nc._ps, wire.FastParser)


async def test_deliveries_keep_payload_headers_and_metadata(bus: Bus) -> None:
    payloads = [b"", b"x", bytes(range(256)) * 40]
    for n, payload in enumerate(payloads):
        await bus.publish(SUBJECT, payload, msg_id=f"m-{n}", headers={"X-Seq": f" {n} "})
    consumer, got = await _receive(bus, "wire-read", len(payloads))
    try:
        assert [m.data for m in got] == payloads
        assert [m.headers for m in got] == [
            {"Nats-Msg-Id": f"m-{n}", "X-Seq": str(n)} for n in range(len(payloads))
        ]
        assert {m.subject for m in got} == {SUBJECT}
        assert [m.metadata.sequence.stream for m in got] == [1, 2, 3]
        await wire.ack_all(got)
    finally:
        await consumer.stop()


async def test_ack_all_settles_every_delivery(bus: Bus) -> None:
    for n in range(50):
        await bus.publish(SUBJECT, b"{}", msg_id=f"a-{n}")
    consumer, got = await _receive(bus, "wire-ack", 50)
    try:
        assert await _unacked(bus, "wire-ack") == 50
        await wire.ack_all(got[:20])
        await wire.ack_all([])
        await bus.nc.flush()
        assert await _unacked(bus, "wire-ack", 30) == 30
        assert all(m._ackd for m in got[:20])
        # Already settled: refused before anything is sent, like msg.ack().
        with pytest.raises(MsgAlreadyAckdError):
            await wire.ack_all([got[20], got[0]])
        await bus.nc.flush()
        await asyncio.sleep(0.2)  # an ack sent by mistake would have landed by now
        assert await _unacked(bus, "wire-ack") == 30
        assert not got[20]._ackd
        with pytest.raises(MsgAlreadyAckdError):
            await wire.ack_all([got[20], got[20]])  # the same delivery twice
        assert not got[20]._ackd
        await wire.ack_all(got[20:])
        await bus.nc.flush()
        assert await _unacked(bus, "wire-ack", 0) == 0
    finally:
        await consumer.stop()


async def test_ack_all_refuses_a_core_message(bus: Bus) -> None:
    got: asyncio.Future[Msg] = asyncio.get_running_loop().create_future()

    async def keep(msg: Msg) -> None:
        got.set_result(msg)

    sub = await bus.nc.subscribe("plain.subject", cb=keep)
    await bus.nc.publish("plain.subject", b"hi")
    msg = await asyncio.wait_for(got, 5)
    await sub.unsubscribe()
    with pytest.raises(NotJSMessageError):
        await wire.ack_all([msg])
