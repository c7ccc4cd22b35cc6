"""The Publisher's subjects, headers and msg ids, its expiry refusal, refusals and deadline."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from contracts.v1 import (
    CommandEnvelope,
    CommandResult,
    EmergencyStop,
    EventEnvelope,
    MowerLink,
    MowerState,
    PauseMow,
    decode_command,
)
from contracts.v1.subjects import MSG_ID_HEADER, PRIORITY_HEADER
from mowdeck.kit.errors import AckTimeoutError, ExpiredCommandError, PublishRefusedError
from mowdeck.kit.publisher import Publisher, pub_ack
from tests.support.fakes import DUPLICATE, NO_STREAM, STORED, FakeNats, refusal_of

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
MOWER = uuid.UUID("00000000-0000-0000-0000-00000000000a")


def command(*, stop: bool = False, ttl_s: float = 30) -> CommandEnvelope:
    return CommandEnvelope.issue(
        mower_id=MOWER,
        account_id=uuid.uuid4(),
        command=EmergencyStop(reason="test") if stop else PauseMow(),
        issued_by="user:a",
        now=NOW,
        ttl=timedelta(seconds=ttl_s),
    )


@pytest.mark.parametrize(
    ("stop", "priority"), [(False, "normal"), (True, "emergency")], ids=["normal", "emergency"]
)
async def test_a_command_goes_to_its_mower_with_its_id_and_priority(
    stop: bool, priority: str
) -> None:
    nc = FakeNats()
    publisher = Publisher(nc)  # type: ignore[arg-type]
    env = command(stop=stop)
    await (await publisher.command(env, now=NOW))
    # A stop is announced first on its core subject for the emergency lanes (the same
    # bytes and headers); an ordinary command goes out once.
    subjects = [f"emergency.mower.{MOWER}"] if stop else []
    assert [m.subject for m in nc.published] == [*subjects, f"command.mower.{MOWER}"]
    for sent in nc.published:
        assert sent.headers == {MSG_ID_HEADER: str(env.command_id), PRIORITY_HEADER: priority}
        assert decode_command(sent.data) == env


async def test_an_expired_command_is_refused_and_never_sent() -> None:
    nc = FakeNats()
    publisher = Publisher(nc)  # type: ignore[arg-type]
    with pytest.raises(ExpiredCommandError):
        await publisher.command(command(ttl_s=1), now=NOW + timedelta(seconds=2))
    assert nc.published == []


async def test_results_states_and_events_get_their_subjects_and_msg_ids() -> None:
    nc = FakeNats()
    keys: list[uuid.UUID] = []

    def key(mower_id: uuid.UUID) -> str:
        keys.append(mower_id)
        return str(mower_id)

    publisher = Publisher(nc, key=key)  # type: ignore[arg-type]
    result = CommandResult(command_id=uuid.uuid4(), mower_id=MOWER, status="executed", at=NOW)
    state = MowerState(
        mower_id=MOWER, account_id=uuid.uuid4(), observed_at=NOW, activity="docked", battery=90
    )
    event = EventEnvelope.new(
        "mower.connected", MowerLink(mower_id=MOWER), producer="test", now=NOW
    )
    await asyncio.gather(
        await publisher.result(result),
        await publisher.state(state, msg_id="s-1"),
        await publisher.event(event),
    )
    await publisher.state_unacked(state, msg_id="s-2")
    assert [(s.subject, s.headers) for s in nc.published] == [
        (f"command.result.mower.{MOWER}", {MSG_ID_HEADER: f"{result.command_id}:executed"}),
        (f"telemetry.mower.{MOWER}", {MSG_ID_HEADER: "s-1"}),
        ("event.mower.connected", {MSG_ID_HEADER: str(event.id)}),
        (f"telemetry.mower.{MOWER}", {MSG_ID_HEADER: "s-2"}),
    ]
    assert nc.published[-1].reply == ""  # no ack asked for
    assert keys == [MOWER, MOWER, MOWER]  # the caller's formatting of mower ids is used


async def test_the_ack_is_the_streams_answer() -> None:
    nc = FakeNats(lambda sent: DUPLICATE if sent.msg_id == "again" else STORED)
    publisher = Publisher(nc)  # type: ignore[arg-type]
    first = pub_ack(await (await publisher.publish("x.y", b"{}", msg_id="first")))
    again = pub_ack(await (await publisher.publish("x.y", b"{}", msg_id="again")))
    assert (first.stream, first.seq, bool(first.duplicate)) == ("S", 1, False)
    assert again.duplicate


async def test_extra_headers_go_along_with_the_msg_id() -> None:
    nc = FakeNats()
    publisher = Publisher(nc)  # type: ignore[arg-type]
    await (await publisher.publish("x.y", b"{}", msg_id="m", headers={"X-Seq": "1"}))
    assert nc.published[0].headers == {MSG_ID_HEADER: "m", "X-Seq": "1"}


async def test_no_stream_and_a_refusal_fail_the_future_with_the_streams_codes() -> None:
    too_large = refusal_of(10054, "message size exceeds maximum")
    nc = FakeNats(lambda sent: NO_STREAM if sent.subject == "nowhere" else too_large)
    publisher = Publisher(nc)  # type: ignore[arg-type]
    nowhere = await publisher.publish("nowhere", b"{}", msg_id="a")
    large = await publisher.publish("event.x", b"{}", msg_id="b")
    with pytest.raises(PublishRefusedError) as no_stream:
        await nowhere
    with pytest.raises(PublishRefusedError) as refused:
        await large
    assert no_stream.value.code == 503
    assert (refused.value.code, refused.value.err_code) == (400, 10054)
    assert refused.value.description == "message size exceeds maximum"


async def test_an_ack_that_never_comes_fails_after_the_deadline_and_is_forgotten() -> None:
    nc = FakeNats(None)
    publisher = Publisher(nc, deadline=0.2)  # type: ignore[arg-type]
    loop = asyncio.get_running_loop()
    started = loop.time()
    ack = await publisher.result(
        CommandResult(command_id=uuid.uuid4(), mower_id=MOWER, status="accepted", at=NOW)
    )
    assert publisher.in_flight == 1
    with pytest.raises(AckTimeoutError):
        await ack
    assert 0.2 <= loop.time() - started < 0.5
    assert publisher.in_flight == 0
    await publisher.stop()


async def test_stop_cancels_what_still_waits_for_its_ack() -> None:
    publisher = Publisher(FakeNats(None))  # type: ignore[arg-type]
    ack = await publisher.publish("x.y", b"{}", msg_id="m")
    await publisher.stop()
    assert ack.cancelled()
    await asyncio.sleep(0)  # done callbacks run on the next turn
    assert publisher.in_flight == 0
