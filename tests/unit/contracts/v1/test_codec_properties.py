"""Property tests: valid envelopes round-trip; invalid ones fail naming the field."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts.v1 import (
    CommandEnvelope,
    Connection,
    ContractError,
    EmergencyStop,
    EventEnvelope,
    ManualDrive,
    MowerRegistration,
    MowerState,
    PauseMow,
    Position,
    ResumeMow,
    ReturnToDock,
    SetBladeHeight,
    SetSpeed,
    StartMow,
    decode_command,
    decode_event,
    decode_state,
    encode,
)

aware = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
finite = {"allow_nan": False, "allow_infinity": False}
commands = st.one_of(
    st.builds(StartMow, duration_min=st.none() | st.integers(1, 1440)),
    st.just(PauseMow()),
    st.just(ResumeMow()),
    st.just(ReturnToDock()),
    st.builds(EmergencyStop, reason=st.none() | st.text(max_size=50)),
    st.builds(SetBladeHeight, height_mm=st.integers(20, 100)),
    st.builds(SetSpeed, speed_mps=st.floats(0.1, 1.5, **finite)),
    st.builds(
        ManualDrive,
        linear_mps=st.floats(-1, 1, **finite),
        angular_rps=st.floats(-2, 2, **finite),
        ttl_ms=st.integers(100, 2000),
    ),
)


@st.composite
def envelopes(draw: st.DrawFn) -> CommandEnvelope:
    issued = draw(aware)
    ttl = draw(st.integers(1, 86_400_000))
    return CommandEnvelope(
        command_id=draw(st.uuids()),
        mower_id=draw(st.uuids()),
        account_id=draw(st.uuids()),
        issued_by=draw(st.text(min_size=1, max_size=40)),
        issued_at=issued,
        expires_at=issued + timedelta(milliseconds=ttl),
        command=draw(commands),
        correlation_id=draw(st.none() | st.uuids()),
    )


@settings(max_examples=300, deadline=None)
@given(envelopes())
def test_valid_envelopes_round_trip(env: CommandEnvelope) -> None:
    decoded = decode_command(encode(env))
    assert decoded == env
    assert decoded.priority == ("emergency" if isinstance(env.command, EmergencyStop) else "normal")


RANGES = {
    "height_mm": ("set_blade_height", 20, 100, {}),
    "speed_mps": ("set_speed", 0.1, 1.5, {}),
    "linear_mps": ("manual_drive", -1, 1, {"angular_rps": 0}),
    "angular_rps": ("manual_drive", -2, 2, {"linear_mps": 0}),
    "ttl_ms": ("manual_drive", 100, 2000, {"linear_mps": 0, "angular_rps": 0}),
}


@settings(max_examples=300, deadline=None)
@given(
    field=st.sampled_from(sorted(RANGES)),
    outside=st.one_of(st.integers(-100_000, -3), st.integers(2001, 100_000)),
)
def test_out_of_range_fails_naming_the_field(field: str, outside: int) -> None:
    kind, low, high, rest = RANGES[field]
    assert not low <= outside <= high
    doc = {
        "command_id": str(uuid.uuid4()),
        "mower_id": str(uuid.uuid4()),
        "account_id": str(uuid.uuid4()),
        "issued_by": "u",
        "issued_at": "2026-01-01T00:00:00Z",
        "expires_at": "2026-01-01T00:01:00Z",
        "command": {"kind": kind, **rest, field: outside},
    }
    try:
        decode_command(json.dumps(doc))
    except ContractError as err:
        assert f"`$.command.{field}`" in str(err)
    else:
        raise AssertionError(f"{field}={outside} was accepted")


@settings(max_examples=200, deadline=None)
@given(
    battery=st.integers(0, 100),
    lat=st.floats(-90, 90, **finite),
    lon=st.floats(-180, 180, **finite),
    at=aware,
    activity=st.sampled_from(["idle", "mowing", "docked", "error", "offline"]),
)
def test_states_round_trip(
    battery: int, lat: float, lon: float, at: datetime, activity: str
) -> None:
    state = MowerState(
        mower_id=uuid.uuid4(),
        account_id=uuid.uuid4(),
        observed_at=at,
        activity=activity,
        battery=battery,  # type: ignore[arg-type]
        position=Position(lat=lat, lon=lon),
    )
    assert decode_state(encode(state)) == state


def _removal() -> bytes:
    registration = MowerRegistration(
        mower_id=uuid.uuid4(),
        account_id=uuid.uuid4(),
        name="m",
        connection=Connection(kind="simulator", options={"url": "ws://127.0.0.1:1/"}),
    )
    event = EventEnvelope.new(
        "mower.removed", registration, producer="fleet", now=datetime.now(UTC)
    )
    return encode(event)


def test_an_event_on_the_subject_of_its_type_decodes() -> None:
    assert decode_event(_removal(), subject="event.mower.removed").type == "mower.removed"


def test_an_event_on_another_types_subject_is_refused_naming_both() -> None:
    # Permissions are by subject: a publisher of link events must not remove a mower.
    with pytest.raises(
        ContractError, match=r"'event\.mower\.connected' carries a 'mower\.removed'"
    ):
        decode_event(_removal(), subject="event.mower.connected")
