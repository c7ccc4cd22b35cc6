"""The Publisher and the micro-batch consumer against a real JetStream."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import pytest
from nats.aio.msg import Msg

from contracts.v1 import (
    CommandEnvelope,
    CommandResult,
    EmergencyStop,
    StartMow,
    decode_result,
    encode,
)
from contracts.v1.subjects import PRIORITY_HEADER
from mowdeck.kit.batching import MicroBatchConsumer
from mowdeck.kit.bus import Bus
from mowdeck.kit.consumer import ConsumerSpec
from mowdeck.kit.errors import AckTimeoutError, PublishRefusedError
from mowdeck.kit.publisher import Publisher, pub_ack

MOWER = uuid.uuid4()


async def test_a_command_is_stored_once_with_its_headers(bus: Bus) -> None:
    publisher = Publisher(bus.nc)
    env = CommandEnvelope.issue(
        mower_id=MOWER,
        account_id=uuid.uuid4(),
        command=EmergencyStop(),
        issued_by="user:a",
        now=datetime.now(UTC),
    )
    sub = await bus.js.subscribe("command.mower.*", stream="COMMANDS", manual_ack=True)
    try:
        first = pub_ack(await (await publisher.command(env, now=datetime.now(UTC))))
        again = pub_ack(await (await publisher.command(env, now=datetime.now(UTC))))
        assert (bool(first.duplicate), again.duplicate) == (False, True)
        msg = await sub.next_msg(timeout=2)
        assert msg.headers is not None
        assert msg.subject == f"command.mower.{MOWER}"
        assert msg.headers["Nats-Msg-Id"] == str(env.command_id)
        assert msg.headers[PRIORITY_HEADER] == "emergency"
    finally:
        await sub.unsubscribe()
        await publisher.stop()


async def test_only_a_stop_is_announced_on_its_core_subject(bus: Bus) -> None:
    # The emergency lane reads emergency.mower.*: a stop's bytes and headers, nothing else.
    publisher = Publisher(bus.nc)
    account = uuid.uuid4()
    now = datetime.now(UTC)
    start = CommandEnvelope.issue(
        mower_id=MOWER, account_id=account, command=StartMow(), issued_by="user:a", now=now
    )
    stop = CommandEnvelope.issue(
        mower_id=MOWER, account_id=account, command=EmergencyStop(), issued_by="user:a", now=now
    )
    announced = await bus.nc.subscribe("emergency.mower.*")
    try:
        await (await publisher.command(start, now=now))
        await (await publisher.command(stop, now=now))  # after the start: its sentinel
        msg = await announced.next_msg(timeout=2)
        assert msg.subject == f"emergency.mower.{MOWER}"
        assert msg.data == encode(stop)
        assert msg.headers == {"Nats-Msg-Id": str(stop.command_id), PRIORITY_HEADER: "emergency"}
        await bus.nc.flush()
        assert announced.pending_msgs == 0  # the start before it was not announced
    finally:
        await announced.unsubscribe()
        await publisher.stop()


async def test_a_subject_no_stream_takes_is_refused_with_503(bus: Bus) -> None:
    publisher = Publisher(bus.nc)
    try:
        with pytest.raises(PublishRefusedError) as refused:
            await asyncio.wait_for(await publisher.publish("nowhere.at.all", b"x", msg_id="x"), 5)
        assert refused.value.code == 503
    finally:
        await publisher.stop()


async def test_an_ack_that_never_comes_fails_at_the_deadline(bus: Bus) -> None:
    # No stream takes event.> any more, but someone listens: no ack, and no "no responders".
    await bus.js.delete_stream("EVENTS")
    listener = await bus.nc.subscribe("event.>")
    publisher = Publisher(bus.nc, deadline=0.3)
    try:
        ack = await publisher.publish("event.mower.registered", b"{}", msg_id="lost")
        with pytest.raises(AckTimeoutError):
            await asyncio.wait_for(ack, timeout=5)
        assert publisher.in_flight == 0
    finally:
        await listener.unsubscribe()
        await publisher.stop()


def _result(msg: Msg) -> CommandResult:
    return decode_result(msg.data)


async def test_a_failed_commit_is_redelivered_whole_and_acked_after_the_next(bus: Bus) -> None:
    attempts: list[list[uuid.UUID]] = []
    committed = asyncio.Event()

    async def commit(results: list[CommandResult]) -> None:
        attempts.append([r.command_id for r in results])
        if len(attempts) == 1:
            raise OSError("database gone")
        if sum(len(a) for a in attempts[1:]) >= 5:
            committed.set()

    spec = ConsumerSpec(
        stream="COMMANDS", subject="command.result.mower.*", durable="batch-test", ack_wait=5
    )
    consumer = MicroBatchConsumer(
        bus, spec, decode=_result, commit=commit, batch_max=100, linger=0.2, nak_delay=0.1
    )
    now = datetime.now(UTC)
    results = [
        CommandResult(command_id=uuid.uuid4(), mower_id=MOWER, status="executed", at=now)
        for _ in range(5)
    ]
    for result in results:
        await bus.publish_result(result)
    await consumer.start()
    try:
        await asyncio.wait_for(committed.wait(), timeout=10)
    finally:
        await consumer.stop()
    ids = [r.command_id for r in results]
    assert attempts[0] == ids  # one batch, then the whole of it again
    assert sorted(i for attempt in attempts[1:] for i in attempt) == sorted(ids)
    info = await bus.js.consumer_info("COMMANDS", "batch-test")
    assert (info.num_ack_pending, info.num_pending) == (0, 0)
