"""Admission in ADR 0013's order."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from contracts.v1 import CommandEnvelope, Connection, MowerRegistration, PauseMow, encode
from contracts.v1.subjects import command_subject
from mowdeck.gateway.admission import Admitted, Expired, Foreign, Invalid, Rejected, admit

T0 = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
ACCOUNT = uuid.UUID("00000000-0000-4000-8000-0000000000aa")
MINE = uuid.UUID(int=4)  # shard 0 of 2
OTHER = uuid.UUID(int=5)  # shard 1 of 2
UNKNOWN = uuid.UUID(int=6)
MOWERS = {
    MINE: MowerRegistration(
        mower_id=MINE, account_id=ACCOUNT, name="m", connection=Connection(kind="simulator")
    )
}


def env(mower: uuid.UUID, account: uuid.UUID = ACCOUNT, at: datetime = T0) -> CommandEnvelope:
    return CommandEnvelope.issue(
        mower_id=mower, account_id=account, command=PauseMow(), issued_by="user:a", now=at
    )


def decide(subject: str, data: bytes, now: datetime = T0) -> object:
    return admit(subject, data, shard_index=0, shard_count=2, mowers=MOWERS, now=now)


@pytest.mark.parametrize(
    ("subject", "data", "expected"),
    [
        (command_subject(MINE), b"{not json", Invalid),
        (command_subject(MINE), encode(env(UNKNOWN)), Invalid),
        ("command.mower.nope", encode(env(MINE)), Invalid),
        (command_subject(OTHER), encode(env(OTHER)), Foreign),
        (command_subject(UNKNOWN), encode(env(UNKNOWN)), Rejected),
        (command_subject(MINE), encode(env(MINE, account=uuid.uuid4())), Rejected),
        (command_subject(MINE), encode(env(MINE, at=T0 - timedelta(minutes=1))), Expired),
        (command_subject(MINE), encode(env(MINE)), Admitted),
    ],
    ids=[
        "malformed",
        "subject-mismatch",
        "bad-subject",
        "other-shard",
        "unknown-mower",
        "foreign-account",
        "expired",
        "admitted",
    ],
)
def test_admission(subject: str, data: bytes, expected: type) -> None:
    assert type(decide(subject, data)) is expected


def test_rejections_say_why() -> None:
    unknown = decide(command_subject(UNKNOWN), encode(env(UNKNOWN)))
    foreign = decide(command_subject(MINE), encode(env(MINE, account=uuid.uuid4())))
    assert isinstance(unknown, Rejected)
    assert isinstance(foreign, Rejected)
    assert unknown.reason == "unknown mower"
    assert foreign.reason == "account does not own this mower"


def test_invalid_names_the_problem() -> None:
    mismatch = decide(command_subject(MINE), encode(env(UNKNOWN)))
    assert isinstance(mismatch, Invalid)
    assert "subject names mower" in mismatch.reason
