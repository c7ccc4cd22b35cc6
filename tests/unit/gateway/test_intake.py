"""Command intake around admission: redeliveries of admitted commands, closing, failures."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from structlog.contextvars import get_contextvars, merge_contextvars
from structlog.testing import capture_logs

from contracts.v1 import (
    CommandEnvelope,
    Connection,
    EmergencyStop,
    MowerRegistration,
    StartMow,
    decode,
    encode,
)
from contracts.v1.subjects import PRIORITY_HEADER, command_subject
from mowdeck.gateway import intake as intake_module
from mowdeck.gateway.actor import EmergencySubmit, Submit
from mowdeck.gateway.controller import PublishResult
from mowdeck.gateway.intake import CommandIntake
from mowdeck.gateway.metrics import GatewayMetrics
from tests.support.fakes import FakeMsg

MOWER = uuid.UUID("00000000-0000-4000-8000-000000000002")  # shard 0 of 1
ACCOUNT = uuid.UUID("00000000-0000-4000-8000-0000000000aa")
REG = MowerRegistration(
    mower_id=MOWER, account_id=ACCOUNT, name="m", connection=Connection(kind="simulator")
)


class FakeEffects:
    def __init__(self) -> None:
        self.results: list[tuple[uuid.UUID, str]] = []
        self.sent: list[uuid.UUID] = []

    def __call__(self, mower_id: uuid.UUID, effects: Any) -> None:
        for effect in effects:
            if isinstance(effect, PublishResult):
                self.results.append((effect.result.command_id, effect.result.status))
            else:
                self.sent.append(effect.envelope.command_id)

    def stop_delivered(self, command_id: uuid.UUID, at: float) -> None:
        pass

    def stop_sent_ahead(self, mower_id: uuid.UUID, command_id: uuid.UUID) -> None:
        pass


def envelope(command: Any = None, *, ttl_s: float = 30.0, now: datetime | None = None) -> Any:
    return CommandEnvelope.issue(
        mower_id=MOWER,
        account_id=ACCOUNT,
        command=command or StartMow(),
        issued_by="user:a",
        now=now or datetime.now(UTC),
        ttl=timedelta(seconds=ttl_s),
    )


def delivery(env: Any, **kw: Any) -> FakeMsg:
    headers = {PRIORITY_HEADER: "emergency"} if env.is_emergency else None
    return FakeMsg(
        encode(env),
        command_subject(env.mower_id),
        headers=headers,
        stream="COMMANDS",
        consumer="device-gateway-0",
        **kw,
    )


def intake(registry: dict[uuid.UUID, MowerRegistration] | None = None, **kw: Any) -> Any:
    told: list[object] = []
    effects = FakeEffects()
    metrics = GatewayMetrics(CollectorRegistry())
    it = CommandIntake(
        shard_index=0,
        shard_count=1,
        mowers={MOWER: REG} if registry is None else registry,  # type: ignore[arg-type]
        metrics=metrics,
        effects=effects,  # type: ignore[arg-type]
        tell=lambda _mower_id, message: told.append(message),
        **kw,
    )
    return it, told, effects, metrics


async def admit(it: Any, msg: FakeMsg) -> None:
    """One delivery admitted and its settlement written (the intake acks once per batch)."""
    await it._admit(msg)
    await it._flush_acks()


async def stored(it: Any, env: CommandEnvelope) -> None:
    """The command's final result is stored on the stream: its delivery is acknowledged."""
    it.held.finished(env.command_id)
    await it.held.flush()


async def test_an_admitted_command_redelivered_after_it_expired_gets_no_second_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    it, told, effects, metrics = intake()
    env = envelope(ttl_s=30)
    first = delivery(env)
    await admit(it, first)
    assert first.settled == []  # held until its final result is stored
    await stored(it, env)
    assert first.settled == ["ack"]
    assert [type(m) for m in told] == [Submit]
    # The ack was lost; JetStream redelivers after ack_wait, when the command has expired.
    later = env.expires_at + timedelta(seconds=1)

    class Later(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:  # noqa: ARG003
            return later

    monkeypatch.setattr(intake_module, "datetime", Later)
    again = delivery(env, num_delivered=2)
    await admit(it, again)
    assert again.settled == ["ack"]
    assert effects.results == []  # not "expired": its results came from the first delivery
    assert len(told) == 1
    assert metrics.duplicates._value.get() == 1


async def test_a_redelivery_after_the_mower_was_removed_gets_no_second_result() -> None:
    registry = {MOWER: REG}
    it, _, effects, _ = intake(registry)
    env = envelope()
    await admit(it, delivery(env))
    await stored(it, env)
    registry.clear()
    again = delivery(env, num_delivered=2)
    await admit(it, again)
    assert again.settled == ["ack"]
    assert effects.results == []


async def test_before_the_seed_an_unknown_mower_s_command_is_given_back_not_rejected() -> None:
    # A restarted shard admits before Fleet's list is applied: its own mowers are not
    # known yet. "rejected: unknown mower" would be wrong, and the process before it may
    # have run the command (a second, different final status). Found by the chaos run.
    registry: dict[uuid.UUID, MowerRegistration] = {}
    seeded = False
    it, told, effects, _ = intake(registry, seeded=lambda: seeded)
    env = envelope()
    early = delivery(env)
    await admit(it, early)
    assert early.settled == ["nak"]
    assert effects.results == []
    seeded = True
    registry[MOWER] = REG
    again = delivery(env, num_delivered=2)
    await admit(it, again)
    assert [type(m) for m in told] == [Submit]
    # Once seeded, a mower Fleet does not list is rejected, as before.
    registry.clear()
    other = envelope()
    await admit(it, delivery(other))
    assert effects.results == [(other.command_id, "rejected")]


async def test_before_the_shard_is_seeded_an_expired_command_is_answered_expired() -> None:
    it, _, effects, _ = intake({}, seeded=lambda: False)
    env = envelope(ttl_s=1, now=datetime.now(UTC) - timedelta(seconds=5))
    await admit(it, delivery(env))
    assert effects.results == [(env.command_id, "expired")]


async def test_an_unknown_command_delivered_late_is_still_answered_expired() -> None:
    it, _, effects, _ = intake()
    env = envelope(ttl_s=1, now=datetime.now(UTC) - timedelta(seconds=5))
    msg = delivery(env, num_delivered=3)
    await admit(it, msg)
    assert effects.results == [(env.command_id, "expired")]
    assert msg.settled == []  # acknowledged once "expired" is stored
    await stored(it, env)
    assert msg.settled == ["ack"]


async def test_while_closing_a_stop_the_lane_already_sent_is_acknowledged_not_given_back() -> None:
    it, told, effects, _ = intake()
    it._loop = asyncio.get_running_loop()
    stop = envelope(EmergencyStop(reason="test"))
    it._send_stop(stop, 0.0)  # the lane brought it and it went to the device
    assert effects.sent == [stop.command_id]
    assert isinstance(told[0], EmergencySubmit)
    it.closing = True
    copy = delivery(stop)
    other = delivery(envelope())
    await it.on_command(copy)
    await it.on_command(other)
    assert copy.settled == ["ack"]  # the next owner would send it a second time
    assert other.settled == ["nak"]  # never admitted: the next owner runs it


async def test_while_closing_the_lane_still_sends_stops_until_the_controllers_close() -> None:
    # Commands admitted before the shutdown still run until their results are out; a
    # stop published meanwhile must still win over them.
    it, told, effects, _ = intake()
    it._loop = asyncio.get_running_loop()
    it.closing = True
    stop = envelope(EmergencyStop(reason="test"))
    it.on_lane_message(delivery(stop))  # type: ignore[arg-type]
    await asyncio.sleep(0)  # handed to the loop ahead of everything else
    assert effects.sent == [stop.command_id]
    assert isinstance(told[0], EmergencySubmit)
    it.stops_closed = True  # the controllers are being closed: nothing left to stop
    later = envelope(EmergencyStop(reason="test"))
    it.on_lane_message(delivery(later))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    assert effects.sent == [stop.command_id]


async def test_a_duplicate_publish_of_a_stop_reaches_the_device_once() -> None:
    it, _, effects, _ = intake()
    stop = envelope(EmergencyStop(reason="test"))
    it._send_stop(stop, 0.0)
    it._send_stop(stop, 0.0)
    assert effects.sent == [stop.command_id]


async def test_a_failing_admission_gives_that_delivery_back_and_admits_the_next() -> None:
    it, told, _, metrics = intake()
    it.start()
    try:
        first, second = envelope(), envelope()
        broken, fine = delivery(first), delivery(second)

        def tell(mower_id: uuid.UUID, message: Any) -> None:
            if message.envelope.command_id == first.command_id:
                raise RuntimeError("controller lookup failed")
            told.append(message)

        it._tell = tell
        await deliver_both(it, broken, fine)
        assert broken.settled == ["nak"]
        assert fine.settled == ["ack"]
        assert [m.envelope.command_id for m in told] == [second.command_id]
        assert metrics.refused.labels("error")._value.get() == 1
        # Given back, it comes back: this time it reaches its controller, and is admitted.
        it._tell = lambda _mower_id, message: told.append(message)
        again = delivery(first, num_delivered=2)
        await admit(it, again)
        await stored(it, first)
        assert again.settled == ["ack"]
        assert [m.envelope.command_id for m in told] == [second.command_id, first.command_id]
        assert metrics.duplicates._value.get() == 0
    finally:
        await it.stop()


async def test_a_failing_ack_costs_only_its_own_delivery() -> None:
    # The batch's acks are written together; if that fails, each is tried on its own.
    it, told, _, _ = intake()
    it.start()
    try:
        broken = delivery(envelope(), fail_ack=ConnectionError("connection being replaced"))
        fine = delivery(envelope())
        await deliver_both(it, broken, fine, first_held=True)
        assert fine.settled == ["ack"]
        assert broken.settled == []  # JetStream gives it back after ack_wait; it is known
        assert len(told) == 2
        assert decode(broken.data, CommandEnvelope).command_id in it.admitted
    finally:
        await it.stop()


async def deliver_both(
    it: Any, broken: FakeMsg, fine: FakeMsg, *, first_held: bool = False
) -> None:
    """Two ordinary deliveries, in order, admitted and their results stored (the first's
    too when ``first_held``); back once the second is settled."""
    await it.on_command(broken)
    await it.on_command(fine)
    fine_env = decode(fine.data, CommandEnvelope)
    while fine_env.command_id not in it.held:  # the admitting task runs
        await asyncio.sleep(0.001)
    if first_held:
        it.held.finished(decode(broken.data, CommandEnvelope).command_id)
    await stored(it, fine_env)
    await fine.wait_settled()


async def test_an_admitted_command_redelivered_in_time_does_not_reach_its_controller_again() -> (
    None
):
    # Its controller may have restarted since, with no memory of the id: it would run twice.
    it, told, _, metrics = intake()
    env = envelope()
    first = delivery(env)
    await admit(it, first)
    again = delivery(env, num_delivered=2)
    await admit(it, again)  # while it runs: takes the first delivery's place
    assert (first.settled, again.settled) == ([], [])
    await stored(it, env)
    assert (first.settled, again.settled) == ([], ["ack"])
    late = delivery(env, num_delivered=3)
    await admit(it, late)  # once answered: acknowledged with no new result
    assert late.settled == ["ack"]
    assert [type(m) for m in told] == [Submit]
    assert metrics.duplicates._value.get() == 2


async def test_the_stream_copy_of_a_stop_still_reaches_its_controller() -> None:
    # The copy sets the controller's boundary between commands before and after the stop.
    it, told, _, _ = intake()
    it._loop = asyncio.get_running_loop()
    stop = envelope(EmergencyStop(reason="test"))
    it._send_stop(stop, 0.0)
    copy = delivery(stop, sequence=9)
    await admit(it, copy)
    assert copy.settled == []  # acknowledged once the stop's final result is stored
    await stored(it, stop)
    assert copy.settled == ["ack"]
    assert [(type(m), m.sequence) for m in told] == [(EmergencySubmit, None), (EmergencySubmit, 9)]


async def test_a_stop_an_earlier_process_answered_sets_the_boundary_and_is_not_sent_again() -> None:
    # The process before this one sent the stop by its lane, stored its final result and
    # stopped before the stream delivered the copy (a change of the shard count). Sending
    # the copy again gave the stop a second final status (found by the chaos run).
    it, told, effects, metrics = intake()
    it._loop = asyncio.get_running_loop()
    stop = envelope(EmergencyStop(reason="test"))
    it.held.finals.add(stop.command_id)  # read from the stream at start
    copy = delivery(stop, sequence=9)
    await admit(it, copy)
    assert effects.sent == []
    assert effects.results == []
    assert copy.settled == ["ack"]
    assert [(type(m), m.sequence, m.answered) for m in told] == [(EmergencySubmit, 9, True)]
    assert metrics.answered_before._value.get() == 1
    # Its announcement published again is not sent either.
    it._send_stop(stop, 0.0)
    assert effects.sent == []


async def test_release_holds_queued_redeliveries_of_running_commands_and_gives_back_the_rest() -> (
    None
):
    it, _, _, _ = intake()
    admitted, fresh = envelope(), envelope()
    await admit(it, delivery(admitted))
    queued_again, queued_new = delivery(admitted, num_delivered=2), delivery(fresh)
    it._normal.extend([(queued_again, 0.0), (queued_new, 0.0)])
    await it.release()
    # The redelivery of a command still running is acknowledged with its result.
    assert (queued_again.settled, queued_new.settled) == ([], ["nak"])
    await stored(it, admitted)
    assert queued_again.settled == ["ack"]


async def test_a_refused_command_s_lines_and_result_name_it_and_nothing_stays_bound() -> None:
    unknown = uuid.UUID("00000000-0000-4000-8000-000000000004")  # shard 0 of 1, not registered
    it, _, _, _ = intake()
    bound_at_result: list[dict[str, object]] = []
    it._effects = lambda *_: bound_at_result.append(get_contextvars())
    env = CommandEnvelope.issue(
        mower_id=unknown,
        account_id=ACCOUNT,
        command=StartMow(),
        issued_by="user:a",
        now=datetime.now(UTC),
    )
    with capture_logs(processors=[merge_contextvars]) as logs:
        await admit(it, delivery(env))
    ids = {"mower_id": unknown, "command_id": env.command_id, "account_id": ACCOUNT}
    assert bound_at_result == [ids]
    [rejected] = [line for line in logs if line["event"] == "command rejected"]
    assert rejected["account_id"] == ACCOUNT  # the one its call did not pass
    assert get_contextvars() == {}
