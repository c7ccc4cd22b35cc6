"""A bus with the fast path off: nats-py's stock client publishes, subscribes and requests."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import msgspec
import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from contracts.v1 import CommandEnvelope, EmergencyStop, decode_command
from contracts.v1.fleet import MowerListRequest
from contracts.v1.subjects import PRIORITY_HEADER
from mowdeck.kit import wire
from mowdeck.kit.bus import Bus, BusError
from mowdeck.kit.consumer import Consumer, ConsumerSpec
from tests.support.jetstream import unsettled

MOWER = uuid.UUID("00000000-0000-4000-8000-000000000042")


@pytest.fixture
def nats_fast_path() -> bool:
    """The ``bus`` fixture on nats-py's stock client."""
    return False


async def test_the_bus_is_nats_py_s_own_client(bus: Bus) -> None:
    assert type(bus.nc) is NATS
    assert not wire.is_fast(bus.nc)


async def test_commands_are_published_to_the_stream_and_consumed(bus: Bus) -> None:
    env = CommandEnvelope.issue(
        mower_id=MOWER,
        account_id=uuid.uuid4(),
        command=EmergencyStop(reason="stock client"),
        issued_by="user:test",
        now=datetime.now(UTC),
    )
    ack = await bus.publish_command(env, now=datetime.now(UTC))
    assert not ack.duplicate
    states = [
        await bus.publish_nowait(f"telemetry.mower.{MOWER}", b"{}", msg_id=f"s-{n}")
        for n in range(5)
    ]
    await asyncio.wait_for(asyncio.gather(*states), 5)

    got: list[Msg] = []
    arrived = asyncio.Event()

    async def keep(msg: Msg) -> None:
        got.append(msg)
        arrived.set()

    spec = ConsumerSpec(stream="COMMANDS", subject="command.mower.*", durable="stock-read")
    consumer = Consumer(bus, spec, keep)
    await consumer.start()
    try:
        await asyncio.wait_for(arrived.wait(), 5)
        (msg,) = got
        assert decode_command(msg.data).command_id == env.command_id
        assert msg.headers is not None and msg.headers[PRIORITY_HEADER] == "emergency"
        assert wire.delivery(msg.reply) == (1, ack.seq)
        await wire.ack_all(got)  # one ack at a time on this client, settled all the same
        await bus.nc.flush()
        assert await unsettled(bus, "COMMANDS", "stock-read", until=(0, 0)) == (0, 0)
    finally:
        await consumer.stop()
    assert (await bus.js.stream_info("TELEMETRY")).state.messages == 5


async def test_a_core_subscription_and_a_request_are_answered(bus: Bus) -> None:
    async def answer(msg: Msg) -> None:
        await msg.respond(b"page:" + msg.data)

    sub = await bus.nc.subscribe("stock.fleet.list", cb=answer)
    try:
        reply = await bus.request("stock.fleet.list", MowerListRequest(limit=5), timeout=5)
        assert msgspec.json.decode(reply.removeprefix(b"page:")) == {
            "shard_index": 0,
            "shard_count": 1,
            "after": None,
            "limit": 5,
        }
        with pytest.raises(BusError, match="NoRespondersError"):
            await bus.request("stock.nobody", MowerListRequest(), timeout=5)
    finally:
        await sub.unsubscribe()


async def test_the_direct_helper_falls_back_to_a_callback_subscription(bus: Bus) -> None:
    raw: list[bytes] = []
    got: asyncio.Queue[Msg] = asyncio.Queue()

    async def fallback(msg: Msg) -> None:
        await got.put(msg)

    def direct(subject: bytes, reply: bytes, data: bytes, hdr: bytes | None) -> None:
        raw.append(data)

    sub = await wire.subscribe_direct(bus.nc, "stock.direct", direct, fallback=fallback)
    await bus.nc.publish("stock.direct", b"x", headers={"K": "v"})
    msg = await asyncio.wait_for(got.get(), 5)
    assert (msg.data, msg.headers) == (b"x", {"K": "v"})
    assert raw == []
    await sub.unsubscribe()
