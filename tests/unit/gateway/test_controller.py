"""The controller's decisions with fixed times: order, e-stop overtaking, dedupe, expiry."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from contracts.v1 import (
    CommandEnvelope,
    Connection,
    EmergencyStop,
    ManualDrive,
    MowerRegistration,
    MowerState,
    PauseMow,
    ReturnToDock,
    SetBladeHeight,
    StartMow,
    decode_result,
    encode,
)
from mowdeck.gateway.controller import (
    PREEMPTED,
    SEEN_LIMIT,
    Controller,
    Effect,
    EndDrive,
    PublishLink,
    PublishResult,
    PublishState,
    ScheduleDriveCheck,
    SendToDevice,
)
from mowdeck.gateway.memory import REMEMBER_AFTER_EXPIRY_S

T0 = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
MOWER = uuid.UUID("00000000-0000-4000-8000-000000000001")
ACCOUNT = uuid.UUID("00000000-0000-4000-8000-0000000000aa")
REG = MowerRegistration(
    mower_id=MOWER, account_id=ACCOUNT, name="m", connection=Connection(kind="simulator")
)


def cmd(command: object = None, *, at: datetime = T0, ttl_s: float = 30) -> CommandEnvelope:
    return CommandEnvelope.issue(
        mower_id=MOWER,
        account_id=ACCOUNT,
        command=command or StartMow(),  # type: ignore[arg-type]
        issued_by="user:a",
        now=at,
        ttl=timedelta(seconds=ttl_s),
    )


def results(effects: list[Effect]) -> list[tuple[uuid.UUID, str, str | None]]:
    return [
        (e.result.command_id, e.result.status, e.result.reason)
        for e in effects
        if isinstance(e, PublishResult)
    ]


def sent(effects: list[Effect]) -> list[uuid.UUID]:
    return [e.envelope.command_id for e in effects if isinstance(e, SendToDevice)]


def test_ordinary_commands_run_one_at_a_time_in_arrival_order() -> None:
    c = Controller(REG)
    a, b, d = cmd(), cmd(PauseMow()), cmd()
    e1 = c.submit(a, 1, T0)
    e2 = c.submit(b, 2, T0)
    e3 = c.submit(d, 3, T0)
    assert sent(e1) == [a.command_id]
    assert sent(e2) == sent(e3) == []
    assert [s for _, s, _ in results(e1 + e2 + e3)] == ["accepted"] * 3
    e4 = c.outcome(a, "executed", None, T0)
    assert results(e4) == [(a.command_id, "executed", None)]
    assert sent(e4) == [b.command_id]
    e5 = c.outcome(b, "failed", "blade jammed", T0)
    assert results(e5) == [(b.command_id, "failed", "blade jammed")]
    assert sent(e5) == [d.command_id]
    assert c.busy


def test_emergency_stop_overtakes_in_flight_and_queued_commands() -> None:
    c = Controller(REG)
    slow = cmd()
    queued = [cmd(PauseMow()) for _ in range(100)]
    c.submit(slow, 1, T0)
    for i, q in enumerate(queued, start=2):
        c.submit(q, i, T0)
    stop = cmd(EmergencyStop(reason="child"))
    effects = c.emergency(stop, 200, T0)
    # The stop goes out first, while `slow` is still in flight.
    assert isinstance(effects[0], SendToDevice)
    assert effects[0].envelope is stop
    rejected = [r for r in results(effects) if r[1] == "rejected"]
    assert rejected == [(q.command_id, "rejected", PREEMPTED) for q in queued]
    # When the slow command finishes nothing queued is left to run.
    after = c.outcome(slow, "executed", None, T0)
    assert sent(after) == []
    assert results(c.outcome(stop, "executed", None, T0)) == [(stop.command_id, "executed", None)]
    assert not c.busy


def test_a_command_published_before_the_stop_but_arriving_after_is_rejected() -> None:
    c = Controller(REG)
    stop = cmd(EmergencyStop())
    c.emergency(stop, 10, T0)
    late = cmd(StartMow())
    effects = c.submit(late, 9, T0)
    assert results(effects) == [
        (late.command_id, "accepted", None),
        (late.command_id, "rejected", PREEMPTED),
    ]
    assert sent(effects) == []
    fresh = cmd(StartMow())
    assert sent(c.submit(fresh, 11, T0)) == [fresh.command_id]


@pytest.mark.parametrize("emergency", [False, True], ids=["ordinary", "emergency"])
def test_a_redelivered_command_executes_once_and_answers_once(emergency: bool) -> None:
    c = Controller(REG)
    env = cmd(EmergencyStop() if emergency else StartMow())
    submit = c.emergency if emergency else c.submit
    first = submit(env, 1, T0)
    again = submit(env, 1, T0)
    assert sent(first) == [env.command_id]
    assert again == []


@pytest.mark.parametrize("emergency", [False, True], ids=["ordinary", "emergency"])
def test_a_mower_s_command_ids_are_kept_until_well_after_they_expire(emergency: bool) -> None:
    c = Controller(REG)
    submit = c.emergency if emergency else c.submit
    old = cmd(EmergencyStop() if emergency else PauseMow(), ttl_s=30)
    submit(old, 1, T0)
    if not emergency:
        c.outcome(old, "executed", None, T0)
    # Just before its time is up a redelivery is still known, however late.
    keep = timedelta(seconds=30 + REMEMBER_AFTER_EXPIRY_S - 1)
    assert submit(old, 1, T0 + keep) == []
    # A later command of the mower forgets it; the memory holds what may still come back.
    later = T0 + keep + timedelta(seconds=2)
    submit(cmd(PauseMow(), at=later), 2, later)
    assert len(c._seen) == 1
    # The same id again now is new to the controller (admission answers such a late
    # delivery before it gets here: it has expired).
    assert results(submit(old, 1, later))[0] == (old.command_id, "accepted", None)


def test_a_mower_remembers_at_most_its_limit_of_command_ids() -> None:
    c = Controller(REG)
    for i in range(SEEN_LIMIT + 5):
        env = cmd(PauseMow(), ttl_s=3600)
        c.submit(env, i, T0)
        c.outcome(env, "executed", None, T0)
    assert len(c._seen) == SEEN_LIMIT


def test_expiry_is_checked_when_the_command_leaves_the_queue() -> None:
    c = Controller(REG)
    busy = cmd()
    short = cmd(PauseMow(), ttl_s=5)
    c.submit(busy, 1, T0)
    c.submit(short, 2, T0)
    effects = c.outcome(busy, "executed", None, T0 + timedelta(seconds=6))
    assert results(effects)[-1] == (short.command_id, "expired", None)
    assert sent(effects) == []


def test_manual_drive_arms_the_dead_man_and_a_newer_drive_rearms_it() -> None:
    c = Controller(REG)
    d1 = cmd(ManualDrive(linear_mps=0.5, angular_rps=0, ttl_ms=400))
    e1 = c.submit(d1, 1, T0)
    check1 = next(e for e in e1 if isinstance(e, ScheduleDriveCheck))
    assert check1.delay_s == pytest.approx(0.4)
    c.outcome(d1, "executed", None, T0)
    d2 = cmd(ManualDrive(linear_mps=0.5, angular_rps=0, ttl_ms=400))
    e2 = c.submit(d2, 2, T0)
    check2 = next(e for e in e2 if isinstance(e, ScheduleDriveCheck))
    assert c.drive_check(check1.token) == []  # superseded
    assert c.drive_check(check2.token) == [EndDrive(MOWER)]
    assert c.drive_check(check2.token) == []  # once


def test_a_drive_that_arrives_while_the_last_is_unanswered_rearms_the_dead_man() -> None:
    # A slow device has not answered the first drive yet; the operator keeps driving.
    # The first drive's timer must not end the session under the second.
    c = Controller(REG)
    d1 = cmd(ManualDrive(linear_mps=0.5, angular_rps=0, ttl_ms=400))
    check1 = next(e for e in c.submit(d1, 1, T0) if isinstance(e, ScheduleDriveCheck))
    d2 = cmd(ManualDrive(linear_mps=0.5, angular_rps=0, ttl_ms=400))
    e2 = c.submit(d2, 2, T0)
    assert sent(e2) == []  # queued behind the first
    check2 = next(e for e in e2 if isinstance(e, ScheduleDriveCheck))
    assert c.drive_check(check1.token) == []  # superseded by the newer arrival
    assert sent(c.outcome(d1, "executed", None, T0)) == [d2.command_id]
    assert c.drive_check(check2.token) == []  # re-armed again when d2 was sent


def test_a_dock_that_executed_ends_the_drive_session_without_the_dead_man_undoing_it() -> None:
    c = Controller(REG)
    drive = cmd(ManualDrive(linear_mps=0.5, angular_rps=0, ttl_ms=400))
    check = next(e for e in c.submit(drive, 1, T0) if isinstance(e, ScheduleDriveCheck))
    c.outcome(drive, "executed", None, T0)
    dock = cmd(ReturnToDock())
    assert sent(c.submit(dock, 2, T0)) == [dock.command_id]
    c.outcome(dock, "executed", None, T0)
    # The drive's ttl passes while the mower docks: nothing may stop it.
    assert c.drive_check(check.token) == []
    # And closing later has no drive session to end.
    assert EndDrive(MOWER) not in c.close(T0, "gateway shutting down")


@pytest.mark.parametrize(
    ("command", "status"),
    [
        (SetBladeHeight(height_mm=30), "executed"),
        (ReturnToDock(), "failed"),
        (PauseMow(), "rejected"),
    ],
    ids=["blade-height", "failed-dock", "rejected-pause"],
)
def test_a_command_that_does_not_leave_manual_drive_keeps_the_dead_man(
    command: object, status: str
) -> None:
    # The mower keeps its last velocity; only the gateway's timer may be left to stop it.
    c = Controller(REG)
    drive = cmd(ManualDrive(linear_mps=1.0, angular_rps=0, ttl_ms=400))
    check = next(e for e in c.submit(drive, 1, T0) if isinstance(e, ScheduleDriveCheck))
    c.outcome(drive, "executed", None, T0)
    other = cmd(command)
    assert sent(c.submit(other, 2, T0)) == [other.command_id]
    c.outcome(other, status, None, T0)  # type: ignore[arg-type]
    assert c.drive_check(check.token) == [EndDrive(MOWER)]


def test_a_command_that_is_not_sent_leaves_the_drive_session_running() -> None:
    c = Controller(REG)
    drive = cmd(ManualDrive(linear_mps=0.5, angular_rps=0, ttl_ms=400))
    check = next(e for e in c.submit(drive, 1, T0) if isinstance(e, ScheduleDriveCheck))
    c.outcome(drive, "executed", None, T0)
    late = cmd(StartMow(), at=T0 - timedelta(seconds=60))  # expired: never reaches the mower
    assert sent(c.submit(late, 2, T0)) == []
    assert c.drive_check(check.token) == [EndDrive(MOWER)]


def state(at: datetime, **kw: object) -> MowerState:
    base: dict[str, object] = {"activity": "mowing", "battery": 80, "account_id": ACCOUNT}
    base.update(kw)
    return MowerState(mower_id=MOWER, observed_at=at, **base)  # type: ignore[arg-type]


def test_states_are_published_on_change_ignoring_time_and_raw() -> None:
    c = Controller(REG)
    assert len(c.state(state(T0))) == 1
    assert c.state(state(T0 + timedelta(seconds=1), raw={"x": 1})) == []
    changed = c.state(state(T0 + timedelta(seconds=2), battery=79))
    assert [type(e) for e in changed] == [PublishState]
    beat = c.heartbeat()
    assert beat == [PublishState(state(T0 + timedelta(seconds=2), battery=79), heartbeat=True)]


def test_the_registered_account_wins_over_the_devices() -> None:
    c = Controller(REG)
    (effect,) = c.state(state(T0, account_id=uuid.uuid4()))
    assert isinstance(effect, PublishState)
    assert effect.state.account_id == ACCOUNT


def test_links_and_close() -> None:
    c = Controller(REG)
    assert c.link(True, None) == [PublishLink(REG, True, None)]
    assert c.link(True, None) == []
    drive = cmd(ManualDrive(linear_mps=0.2, angular_rps=0))
    c.submit(drive, 1, T0)
    queued = cmd(PauseMow())
    c.submit(queued, 2, T0)
    effects = c.close(T0, "gateway shutting down")
    assert EndDrive(MOWER) in effects
    assert (queued.command_id, "rejected", "gateway shutting down") in results(effects)
    assert PublishLink(REG, False, "gateway shutting down") in effects


def test_a_fast_path_stop_rejects_everything_the_stream_delivers_before_its_copy() -> None:
    c = Controller(REG)
    running, queued = cmd(), cmd(PauseMow())
    c.submit(running, 5, T0)
    c.submit(queued, 6, T0)
    stop = cmd(EmergencyStop())
    effects = c.emergency(stop, None, T0)  # seen as published, stream copy still behind
    assert isinstance(effects[0], SendToDevice)
    assert (queued.command_id, "rejected", PREEMPTED) in results(effects)
    # Delivered by the stream before the stop's own copy: published before the stop.
    behind = cmd(StartMow())
    assert results(c.submit(behind, 7, T0))[-1] == (behind.command_id, "rejected", PREEMPTED)
    # The stream copy sets the boundary and is not executed again.
    assert c.emergency(stop, 8, T0) == []
    after = cmd(StartMow())
    c.outcome(running, "executed", None, T0)
    assert sent(c.submit(after, 9, T0)) == [after.command_id]


def test_a_fast_path_stop_without_a_stream_copy_stops_blocking_when_it_expires() -> None:
    c = Controller(REG)
    stop = cmd(EmergencyStop(), ttl_s=10)
    c.emergency(stop, None, T0)
    blocked = cmd(StartMow())
    assert results(c.submit(blocked, 3, T0))[-1][1] == "rejected"
    later = cmd(StartMow(), at=T0 + timedelta(seconds=11))
    assert sent(c.submit(later, 4, T0 + timedelta(seconds=11))) == [later.command_id]


def test_a_stop_the_fast_path_already_sent_is_not_sent_again_but_answered() -> None:
    c = Controller(REG)
    stop = cmd(EmergencyStop(), ttl_s=1)
    effects = c.emergency(stop, None, T0 + timedelta(seconds=2), sent=True)
    assert sent(effects) == []
    assert results(effects) == [(stop.command_id, "accepted", None)]
    assert results(c.outcome(stop, "executed", None, T0)) == [(stop.command_id, "executed", None)]


def test_a_stop_answered_by_an_earlier_process_sets_the_boundary_only() -> None:
    # Its stream copy comes to a new process: not sent again, no second result; the
    # commands published before it are not run after it.
    c = Controller(REG)
    running, queued = cmd(), cmd(PauseMow())
    c.submit(running, 5, T0)
    c.submit(queued, 6, T0)
    stop = cmd(EmergencyStop())
    effects = c.emergency(stop, 8, T0, answered=True)
    assert sent(effects) == []
    assert results(effects) == [(queued.command_id, "rejected", PREEMPTED)]
    behind = cmd(StartMow())
    assert results(c.submit(behind, 7, T0))[-1] == (behind.command_id, "rejected", PREEMPTED)
    # A redelivery of the copy changes nothing; a command after the stop runs.
    assert c.emergency(stop, 8, T0) == []
    c.outcome(running, "executed", None, T0)
    after = cmd(StartMow())
    assert sent(c.submit(after, 9, T0)) == [after.command_id]


def test_reasons_are_made_decodable_and_storable_for_every_consumer() -> None:
    c = Controller(REG)
    a = cmd()
    c.submit(a, 1, T0)
    effects = c.outcome(a, "failed", "jam\x00" + "x" * 5000, T0)
    (result,) = [e.result for e in effects if isinstance(e, PublishResult)]
    assert result.reason is not None
    assert "\x00" not in result.reason
    assert result.reason.startswith("jam\ufffd")
    assert len(result.reason) == 1000
    # What consumers decode: within the contract.
    assert decode_result(encode(result)).reason == result.reason


def test_every_result_names_the_kind_of_its_command() -> None:
    c = Controller(REG)
    effects = c.submit(cmd(PauseMow()), 1, T0)
    kinds = [e.result.kind for e in effects if isinstance(e, PublishResult)]
    assert kinds == ["pause_mow"]
