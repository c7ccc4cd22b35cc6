"""The bus against a real JetStream: de-duplication, stream limits, explicit outcomes."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import structlog
from nats.aio.msg import Msg

from contracts.v1 import CommandEnvelope, CommandResult, EmergencyStop, PauseMow, decode_command
from contracts.v1.subjects import COMMANDS, EVENTS, PRIORITY_HEADER, STREAMS, TELEMETRY
from mowdeck.kit.bus import Bus, ExpiredCommandError
from mowdeck.kit.consumer import (
    Consumer,
    ConsumerSpec,
    DropMessage,
    RetryLater,
    delivery_count,
    settle,
)
from tests.support.eventually import sentinel_through
from tests.support.jetstream import unsettled

MOWER = uuid.UUID("00000000-0000-4000-8000-000000000042")
ACCOUNT = uuid.uuid4()


def _command(command: object = None, *, now: datetime | None = None) -> CommandEnvelope:
    return CommandEnvelope.issue(
        mower_id=MOWER,
        account_id=ACCOUNT,
        command=command or PauseMow(),  # type: ignore[arg-type]
        issued_by="user:test",
        now=now or datetime.now(UTC),
    )


async def test_streams_have_the_contract_limits(bus: Bus) -> None:
    configs = {}
    for spec in STREAMS:
        info = await bus.js.stream_info(spec.name)
        assert info.config.subjects == list(spec.subjects)
        assert info.config.duplicate_window == spec.duplicate_window_s
        assert info.config.max_age == spec.max_age_s
        configs[spec.name] = info.config
    # What the server keeps, in the contract's numbers (not the specs' own constants).
    assert (
        configs[COMMANDS.name].duplicate_window,
        configs[TELEMETRY.name].duplicate_window,
        configs[TELEMETRY.name].max_age,
        configs[EVENTS.name].duplicate_window,
    ) == (120, 30, 3600, 120)


async def test_ensure_streams_is_idempotent_and_repairs_drift(bus: Bus) -> None:
    cfg = (await bus.js.stream_info("TELEMETRY")).config
    cfg.max_age = 60
    await bus.js.update_stream(cfg)
    await bus.ensure_streams()
    await bus.ensure_streams()
    assert (await bus.js.stream_info("TELEMETRY")).config.max_age == 3600


async def test_ensure_streams_keeps_what_an_operator_configured(bus: Bus) -> None:
    cfg = (await bus.js.stream_info("EVENTS")).config
    cfg.max_age = 30 * 24 * 3600.0
    cfg.max_bytes = 1 << 30
    cfg.subjects = ["event.>", "audit.>"]
    await bus.js.update_stream(cfg)
    with structlog.testing.capture_logs() as logs:
        applied = await bus.ensure_streams(replicas=3)
    after = (await bus.js.stream_info("EVENTS")).config
    assert (after.max_age, after.max_bytes, after.subjects, after.num_replicas) == (
        30 * 24 * 3600,
        1 << 30,
        ["event.>", "audit.>"],
        1,
    )
    events = next(a for a in applied if a.stream == "EVENTS")
    assert events.action == "unchanged"
    assert events.kept == (
        f"max_age {30 * 24 * 3600} (contracts: {7 * 24 * 3600})",
        "replicas 1 (configured here: 3)",
    )
    assert any(e["event"] == "stream settings left alone" and e["stream"] == "EVENTS" for e in logs)


async def test_a_repeated_msg_id_is_stored_once(bus: Bus) -> None:
    env = _command()
    first = await bus.publish_command(env, now=datetime.now(UTC))
    second = await bus.publish_command(env, now=datetime.now(UTC))
    assert not first.duplicate
    assert second.duplicate
    assert (await bus.js.stream_info("COMMANDS")).state.messages == 1


async def test_results_are_deduplicated_per_status(bus: Bus) -> None:
    cid = uuid.uuid4()
    now = datetime.now(UTC)
    for status in ("accepted", "executed", "executed", "accepted"):
        await bus.publish_result(
            CommandResult(command_id=cid, mower_id=MOWER, status=status, at=now)
        )  # type: ignore[arg-type]
    assert (await bus.js.stream_info("COMMANDS")).state.messages == 2


async def test_priority_header_is_set_from_the_command(bus: Bus) -> None:
    sub = await bus.js.subscribe("command.mower.*", stream="COMMANDS", manual_ack=True)
    await bus.publish_command(_command(EmergencyStop()), now=datetime.now(UTC))
    await bus.publish_command(_command(PauseMow()), now=datetime.now(UTC))
    first = await sub.next_msg(timeout=2)
    second = await sub.next_msg(timeout=2)
    assert first.headers is not None
    assert second.headers is not None
    assert first.headers[PRIORITY_HEADER] == "emergency"
    assert second.headers[PRIORITY_HEADER] == "normal"
    assert first.headers["Nats-Msg-Id"] == str(decode_command(first.data).command_id)
    await sub.unsubscribe()


async def test_an_expired_command_is_not_published(bus: Bus) -> None:
    env = _command(now=datetime.now(UTC) - timedelta(minutes=5))
    with pytest.raises(ExpiredCommandError):
        await bus.publish_command(env, now=datetime.now(UTC))
    assert (await bus.js.stream_info("COMMANDS")).state.messages == 0


SENTINEL = "sentinel"  # the reason of the stop _run_consumer publishes behind the rest


async def _run_consumer(bus: Bus, handler, *, expect: int, durable: str) -> list[str]:  # type: ignore[no-untyped-def]
    outcomes: list[str] = []
    done, sentinel_seen = asyncio.Event(), asyncio.Event()
    sentinel = _command(EmergencyStop(reason=SENTINEL))

    async def on_message(msg: Msg) -> None:
        env = decode_command(msg.data)
        if isinstance(env.command, EmergencyStop) and env.command.reason == SENTINEL:
            if env.command_id == sentinel.command_id:  # not an earlier run's
                sentinel_seen.set()
            await msg.ack()
            return
        outcomes.append(await settle(msg, handler, consumer=durable, error_delay=0.1))
        if len(outcomes) >= expect:
            done.set()

    consumer = Consumer(
        bus,
        ConsumerSpec(stream="COMMANDS", subject="command.mower.*", durable=durable, ack_wait=5),
        on_message,
    )
    await consumer.start()
    try:
        await asyncio.wait_for(done.wait(), timeout=10)
        # A message given back without delay is redelivered ahead of one published now;
        # one given back with a delay is still pending. After the sentinel, nothing is.
        await sentinel_through(
            lambda: bus.publish_command(sentinel, now=datetime.now(UTC)), sentinel_seen.is_set
        )
        assert await unsettled(bus, "COMMANDS", durable, until=(0, 0)) == (0, 0)
    finally:
        await consumer.stop()
    return outcomes


async def test_term_is_not_redelivered_nak_is(bus: Bus) -> None:
    await bus.publish_command(_command(), now=datetime.now(UTC))
    seen: list[int] = []

    async def drop(msg: Msg) -> None:
        seen.append(delivery_count(msg))
        raise DropMessage("malformed")

    assert await _run_consumer(bus, drop, expect=1, durable="t-term") == ["term"]
    assert seen == [1]

    wanted = _command()
    await bus.publish_command(wanted, now=datetime.now(UTC))
    attempts: list[int] = []

    async def flaky(msg: Msg) -> None:
        if decode_command(msg.data).command_id != wanted.command_id:
            return  # the termed message of the first half: a new durable sees it once
        attempts.append(delivery_count(msg))
        if len(attempts) < 3:
            raise RetryLater("database busy", delay=0.05)

    outcomes = await _run_consumer(bus, flaky, expect=4, durable="t-nak")
    assert sorted(outcomes) == ["ack", "ack", "nak", "nak"]
    assert attempts == [1, 2, 3]


async def test_a_failing_handler_is_naked_and_redelivered(bus: Bus) -> None:
    await bus.publish_command(_command(), now=datetime.now(UTC))
    calls = 0

    async def boom(msg: Msg) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("bug")

    assert await _run_consumer(bus, boom, expect=2, durable="t-err") == ["nak", "ack"]


async def test_stopping_consumer_leaves_the_durable_for_the_next_start(bus: Bus) -> None:
    handled: list[str] = []

    async def on_message(msg: Msg) -> None:
        handled.append(decode_command(msg.data).issued_by)
        await msg.ack()

    # Deliveries that race the unsubscribe come back after ack_wait: keep it short here.
    spec = ConsumerSpec(
        stream="COMMANDS", subject="command.mower.*", durable="t-resume", ack_wait=1
    )
    consumer = Consumer(bus, spec, on_message)
    await consumer.start()
    await consumer.stop()
    await bus.publish_command(_command(), now=datetime.now(UTC))
    again = Consumer(bus, spec, on_message)
    await again.start()
    for _ in range(250):
        if handled:
            break
        await asyncio.sleep(0.02)
    await again.stop()
    assert handled == ["user:test"]


async def test_stopping_gives_back_what_the_client_had_queued_at_once(bus: Bus) -> None:
    # Deliveries already in the client's queue when stop() begins are nak'd, so the next
    # start gets them now, not after ack_wait (30 s here).
    sent = [_command() for _ in range(5)]
    for env in sent:
        await bus.publish_command(env, now=datetime.now(UTC))
    spec = ConsumerSpec(
        stream="COMMANDS", subject="command.mower.*", durable="t-giveback", ack_wait=30
    )
    entered, release = asyncio.Event(), asyncio.Event()
    first: list[uuid.UUID] = []

    async def slow(msg: Msg) -> None:
        first.append(decode_command(msg.data).command_id)
        entered.set()
        await release.wait()  # the other four wait in the client's queue meanwhile
        await msg.ack()

    consumer = Consumer(bus, spec, slow)
    await consumer.start()
    await asyncio.wait_for(entered.wait(), 5)
    stopping = asyncio.create_task(consumer.stop())
    await asyncio.sleep(0.1)
    release.set()
    await asyncio.wait_for(stopping, 5)
    assert len(first) == 1

    later: list[uuid.UUID] = []

    async def collect(msg: Msg) -> None:
        later.append(decode_command(msg.data).command_id)
        await msg.ack()

    again = Consumer(bus, spec, collect)
    await again.start()
    try:
        for _ in range(150):
            if len(later) == 4:
                break
            await asyncio.sleep(0.02)
    finally:
        await again.stop()
    assert sorted(later) == sorted(e.command_id for e in sent if e.command_id not in first)


async def test_a_changed_ack_wait_or_limit_reaches_an_existing_durable(bus: Bus) -> None:
    async def ignore(msg: Msg) -> None:
        await msg.ack()

    def spec(ack_wait: float, max_ack_pending: int) -> ConsumerSpec:
        return ConsumerSpec(
            stream="COMMANDS",
            subject="command.mower.*",
            durable="t-reconcile",
            ack_wait=ack_wait,
            max_ack_pending=max_ack_pending,
        )

    first = Consumer(bus, spec(30, 20_000), ignore)
    await first.start()
    await first.stop()
    again = Consumer(bus, spec(5, 2000), ignore)
    await again.start()
    try:
        info = await bus.js.consumer_info("COMMANDS", "t-reconcile")
        assert (info.config.ack_wait, info.config.max_ack_pending) == (5.0, 2000)
    finally:
        await again.stop()


async def test_a_changed_filter_reaches_an_existing_durable(bus: Bus) -> None:
    async def ignore(msg: Msg) -> None:
        await msg.ack()

    def spec(subject: str) -> ConsumerSpec:
        return ConsumerSpec(stream="TELEMETRY", subject=subject, durable="t-refilter")

    first = Consumer(bus, spec("telemetry.mower.*"), ignore)
    await first.start()
    await first.stop()
    again = Consumer(bus, spec("telemetry.>"), ignore)
    await again.start()  # nats-py refuses to bind a subject the durable does not filter
    try:
        info = await bus.js.consumer_info("TELEMETRY", "t-refilter")
        assert info.config.filter_subject == "telemetry.>"
    finally:
        await again.stop()


async def test_a_handler_whose_await_was_cancelled_does_not_end_the_subscription(
    bus: Bus,
) -> None:
    # nats-py ends a subscription's delivery loop on a CancelledError from its callback.
    sent = [_command() for _ in range(2)]
    for env in sent:
        await bus.publish_command(env, now=datetime.now(UTC))
    handled: list[uuid.UUID] = []

    async def handler(msg: Msg) -> None:
        if not handled:
            handled.append(decode_command(msg.data).command_id)
            doomed = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_soon(doomed.cancel)  # cancelled by someone else
            await doomed
        handled.append(decode_command(msg.data).command_id)
        await msg.ack()

    spec = ConsumerSpec(stream="COMMANDS", subject="command.mower.*", durable="t-cancel")
    consumer = Consumer(bus, spec, handler)
    await consumer.start()
    try:
        for _ in range(150):  # the given-back first delivery returns after 1 s
            if len(handled) >= 3:
                break
            await asyncio.sleep(0.02)
    finally:
        await consumer.stop()
    assert sorted(set(handled)) == sorted(e.command_id for e in sent)
    assert len(handled) == 3  # first (cancelled), second, first again


async def test_a_consumer_that_settles_while_closing_gets_what_arrives_meanwhile(bus: Bus) -> None:
    sent = [_command() for _ in range(4)]
    for env in sent:
        await bus.publish_command(env, now=datetime.now(UTC))
    spec = ConsumerSpec(stream="COMMANDS", subject="command.mower.*", durable="t-settles")
    entered, release = asyncio.Event(), asyncio.Event()
    seen: list[uuid.UUID] = []

    async def handler(msg: Msg) -> None:
        seen.append(decode_command(msg.data).command_id)
        entered.set()
        await release.wait()
        await msg.ack()  # the handler decides, also while the consumer stops

    consumer = Consumer(bus, spec, handler, settles_while_closing=True)
    await consumer.start()
    await asyncio.wait_for(entered.wait(), 5)
    stopping = asyncio.create_task(consumer.stop())
    await asyncio.sleep(0.1)
    release.set()
    await asyncio.wait_for(stopping, 5)
    assert sorted(seen) == sorted(e.command_id for e in sent)
    assert await unsettled(bus, "COMMANDS", "t-settles", until=(0, 0)) == (0, 0)
