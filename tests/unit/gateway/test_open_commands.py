"""What each controller holds: told, and neither at the device nor answered yet."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from contracts.v1 import CommandEnvelope, EmergencyStop, StartMow
from mowdeck.gateway.actor import EmergencySubmit, Heartbeat, Submit
from mowdeck.gateway.controller import SendToDevice, result_effect
from mowdeck.gateway.open_commands import OpenCommands

MOWER = uuid.UUID("00000000-0000-4000-8000-000000000005")
ACCOUNT = uuid.UUID("00000000-0000-4000-8000-0000000000aa")
KEY = str(MOWER)


def envelope(command: object = None, *, age_s: float = 0) -> CommandEnvelope:
    """A command issued ``age_s`` ago with a 30 s time to live."""
    return CommandEnvelope.issue(
        mower_id=MOWER,
        account_id=ACCOUNT,
        command=StartMow() if command is None else command,  # type: ignore[arg-type]
        issued_by="user:a",
        now=datetime.now(UTC) - timedelta(seconds=age_s),
        ttl=timedelta(seconds=30),
    )


def test_a_command_is_held_until_it_reaches_the_device_or_its_final_result() -> None:
    open_ = OpenCommands()
    sent, answered, waiting = envelope(), envelope(), envelope()
    for env in (sent, answered, waiting):
        open_.told(KEY, Submit(env, 1))
    now = datetime.now(UTC)
    open_.performed(KEY, [result_effect(sent, "accepted", now), SendToDevice(sent)])
    open_.performed(KEY, [result_effect(answered, "accepted", now)])
    assert len(open_) == 2  # accepted is not final
    open_.performed(KEY, [result_effect(answered, "rejected", now, "preempted")])
    assert open_.take(KEY) == [waiting]
    assert open_.take(KEY) == []


def test_only_commands_are_held_and_not_a_stop_the_lane_sent_or_an_expired_one() -> None:
    open_ = OpenCommands()
    open_.told(KEY, Heartbeat())
    open_.told(KEY, EmergencySubmit(envelope(EmergencyStop(reason="t")), None, sent=True))
    open_.told(KEY, Submit(envelope(age_s=60), 1))  # expired
    assert len(open_) == 0
    stop = envelope(EmergencyStop(reason="t"))
    open_.told(KEY, EmergencySubmit(stop, 7))  # by the stream: its controller decides
    assert open_.take(KEY) == [stop]


def test_what_waits_for_the_successor_is_kept() -> None:
    open_ = OpenCommands()
    first, second = envelope(), envelope()
    open_.told(KEY, Submit(first, 1))
    open_.told(KEY, Submit(second, 2))
    assert open_.take(KEY, keep=[second.command_id]) == [first]
    assert open_.take(KEY) == [second]
