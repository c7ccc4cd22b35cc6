"""Command envelope rules: priority, expiry, ranges, timestamps, tolerant reading."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from contracts.v1 import (
    COMMAND_KINDS,
    CommandEnvelope,
    CommandResult,
    ContractError,
    EmergencyStop,
    ManualDrive,
    PauseMow,
    StartMow,
    decode_command,
    decode_result,
    encode,
)

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
MOWER = uuid.UUID("00000000-0000-4000-8000-000000000001")
ACCOUNT = uuid.UUID("00000000-0000-4000-8000-0000000000aa")


def envelope_json(**overrides: object) -> bytes:
    doc: dict[str, object] = {
        "command_id": "11111111-1111-4111-8111-111111111111",
        "mower_id": str(MOWER),
        "account_id": str(ACCOUNT),
        "issued_by": "user:alice",
        "issued_at": "2026-05-01T12:00:00Z",
        "expires_at": "2026-05-01T12:00:30Z",
        "command": {"kind": "pause_mow"},
    }
    doc.update(overrides)
    return json.dumps({k: v for k, v in doc.items() if v is not ...}).encode()


@pytest.mark.parametrize(
    ("command", "claimed", "expected"),
    [
        ({"kind": "pause_mow"}, ..., "normal"),
        ({"kind": "pause_mow"}, "normal", "normal"),
        ({"kind": "emergency_stop"}, ..., "emergency"),
        ({"kind": "emergency_stop"}, "emergency", "emergency"),
        ({"kind": "emergency_stop", "reason": "child"}, "normal", "emergency"),
    ],
    ids=[
        "derived-normal",
        "explicit-normal",
        "derived-emergency",
        "explicit-emergency",
        "downgrade-refused",
    ],
)
def test_priority_is_derived_from_the_command(
    command: dict[str, object], claimed: object, expected: str
) -> None:
    env = decode_command(envelope_json(command=command, priority=claimed))
    assert env.priority == expected
    assert env.is_emergency is (expected == "emergency")


@pytest.mark.parametrize("kind", [k for k in COMMAND_KINDS if k != "emergency_stop"])
def test_only_an_emergency_stop_may_claim_emergency(kind: str) -> None:
    params = {
        "set_blade_height": {"height_mm": 40},
        "set_speed": {"speed_mps": 0.5},
        "manual_drive": {"linear_mps": 0.2, "angular_rps": 0.0},
    }.get(kind, {})
    with pytest.raises(ContractError, match="`priority`"):
        decode_command(envelope_json(command={"kind": kind, **params}, priority="emergency"))


@pytest.mark.parametrize(
    ("command", "field"),
    [
        ({"kind": "set_blade_height", "height_mm": 19}, "height_mm"),
        ({"kind": "set_blade_height", "height_mm": 101}, "height_mm"),
        ({"kind": "set_speed", "speed_mps": 0.05}, "speed_mps"),
        ({"kind": "set_speed", "speed_mps": 1.6}, "speed_mps"),
        ({"kind": "manual_drive", "linear_mps": 1.5, "angular_rps": 0}, "linear_mps"),
        ({"kind": "manual_drive", "linear_mps": 0, "angular_rps": -2.5}, "angular_rps"),
        ({"kind": "manual_drive", "linear_mps": 0, "angular_rps": 0, "ttl_ms": 99}, "ttl_ms"),
        ({"kind": "manual_drive", "linear_mps": 0, "angular_rps": 0, "ttl_ms": 2001}, "ttl_ms"),
        ({"kind": "start_mow", "duration_min": 0}, "duration_min"),
        ({"kind": "fly_away"}, "kind"),
    ],
    ids=[
        "blade-low",
        "blade-high",
        "speed-low",
        "speed-high",
        "linear",
        "angular",
        "ttl-low",
        "ttl-high",
        "duration",
        "unknown-kind",
    ],
)
def test_out_of_range_parameters_name_the_field(command: dict[str, object], field: str) -> None:
    with pytest.raises(ContractError, match=field):
        decode_command(envelope_json(command=command))


def test_manual_drive_ttl_defaults_to_one_second() -> None:
    env = decode_command(
        envelope_json(command={"kind": "manual_drive", "linear_mps": 0.3, "angular_rps": 0.1})
    )
    assert isinstance(env.command, ManualDrive)
    assert env.command.ttl_ms == 1000


@pytest.mark.parametrize(
    ("issued", "expires"),
    [
        ("2026-05-01T12:00:00Z", "2026-05-01T12:00:00Z"),
        ("2026-05-01T12:00:00Z", "2026-05-01T11:59:59Z"),
    ],
    ids=["equal", "before"],
)
def test_expiry_must_follow_issue(issued: str, expires: str) -> None:
    with pytest.raises(ContractError, match="`expires_at` must be after `issued_at`"):
        decode_command(envelope_json(issued_at=issued, expires_at=expires))


@pytest.mark.parametrize("field", ["issued_at", "expires_at"])
def test_naive_timestamps_are_invalid(field: str) -> None:
    with pytest.raises(ContractError, match=field):
        decode_command(envelope_json(**{field: "2026-05-01T12:00:10"}))


def test_naive_timestamps_are_invalid_when_constructed() -> None:
    with pytest.raises(ContractError, match="issued_at"):
        CommandEnvelope.issue(
            mower_id=MOWER,
            account_id=ACCOUNT,
            command=PauseMow(),
            issued_by="u",
            now=datetime(2026, 1, 1),
        )


def test_offsets_are_normalised_to_utc() -> None:
    env = decode_command(envelope_json(issued_at="2026-05-01T14:00:00+02:00"))
    assert env.issued_at == NOW
    assert env.issued_at.tzinfo is UTC


@pytest.mark.parametrize(
    ("offset_s", "expired"),
    [(-1, False), (0, True), (1, True)],
    ids=["just-before", "at-expiry", "after"],
)
def test_is_expired(offset_s: int, expired: bool) -> None:
    env = CommandEnvelope.issue(
        mower_id=MOWER,
        account_id=ACCOUNT,
        command=StartMow(),
        issued_by="u",
        now=NOW,
        ttl=timedelta(seconds=30),
    )
    assert env.is_expired(NOW + timedelta(seconds=30 + offset_s)) is expired


def test_unknown_fields_are_ignored() -> None:
    doc = json.loads(envelope_json(command={"kind": "set_speed", "speed_mps": 0.4, "turbo": 1}))
    doc["future_field"] = {"x": 1}
    env = decode_command(json.dumps(doc))
    assert env.kind == "set_speed"


def test_issue_builds_a_valid_envelope_that_round_trips() -> None:
    env = CommandEnvelope.issue(
        mower_id=MOWER,
        account_id=ACCOUNT,
        command=EmergencyStop(reason="dog"),
        issued_by="user:bob",
        now=NOW.astimezone(timezone(timedelta(hours=1))),
    )
    assert env.priority == "emergency"
    assert env.issued_at.tzinfo is UTC
    assert decode_command(encode(env)) == env


def test_result_msg_id_and_finality() -> None:
    cid = uuid.uuid4()
    accepted = CommandResult(command_id=cid, mower_id=MOWER, status="accepted", at=NOW)
    executed = decode_result(
        encode(CommandResult(command_id=cid, mower_id=MOWER, status="executed", at=NOW))
    )
    assert accepted.msg_id == f"{cid}:accepted"
    assert not accepted.is_final
    assert executed.is_final


def test_result_refuses_an_unknown_status() -> None:
    doc = {
        "command_id": str(uuid.uuid4()),
        "mower_id": str(MOWER),
        "status": "done",
        "at": "2026-05-01T12:00:00Z",
    }
    with pytest.raises(ContractError, match="status"):
        decode_result(json.dumps(doc))
