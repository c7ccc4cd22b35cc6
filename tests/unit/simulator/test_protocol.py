"""Device protocol frames: round trips and the reasons a frame is refused."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from contracts.v1 import ManualDrive
from simulator.protocol import (
    CommandFrame,
    OutcomeFrame,
    ProtocolError,
    decode_device_frame,
    decode_gateway_frame,
    encode_frame,
)

CID = uuid.UUID("11111111-1111-4111-8111-111111111111")


def test_command_frame_round_trip() -> None:
    frame = CommandFrame(command_id=CID, command=ManualDrive(linear_mps=0.3, angular_rps=0.1))
    assert decode_gateway_frame(encode_frame(frame)) == frame
    assert b'"type":"command"' in encode_frame(frame)
    assert b'"v":1' in encode_frame(frame)


def test_outcome_frame_round_trip() -> None:
    frame = OutcomeFrame(command_id=CID, status="failed", at=datetime.now(UTC), reason="x")
    assert decode_device_frame(encode_frame(frame)) == frame


@pytest.mark.parametrize(
    ("data", "reason", "has_id"),
    [
        (b"{not json", "malformed", False),
        (
            b'{"type": "hello", "v": 1, "mower_id": "' + str(CID).encode() + b'"}',
            "unexpected frame type",
            False,
        ),
        (
            b'{"type": "command", "v": 1, "command_id": "'
            + str(CID).encode()
            + b'", "command": {"kind": "fly"}}',
            "invalid command",
            True,
        ),
        (
            b'{"type": "command", "v": 1, "command_id": "'
            + str(CID).encode()
            + b'", "command": {"kind": "set_speed", "speed_mps": 9}}',
            "invalid command",
            True,
        ),
        (
            b'{"type": "command", "v": 2, "command_id": "'
            + str(CID).encode()
            + b'", "command": {"kind": "pause_mow"}}',
            "unsupported protocol version",
            True,
        ),
    ],
    ids=["not-json", "wrong-type", "unknown-kind", "out-of-range", "future-version"],
)
def test_refused_gateway_frames_carry_a_reason(data: bytes, reason: str, has_id: bool) -> None:
    with pytest.raises(ProtocolError, match=reason) as info:
        decode_gateway_frame(data)
    assert (info.value.command_id == CID) is has_id


def test_frames_nested_too_deeply_are_refused_with_a_reason() -> None:
    deep = b"[" * 5000 + b"]" * 5000
    with pytest.raises(ProtocolError, match="nested too deeply"):
        decode_device_frame(b'{"type": "state", "v": 1, "extra": ' + deep + b"}")
    with pytest.raises(ProtocolError, match="nested too deeply"):
        decode_gateway_frame(b'{"type": "command", "v": 1, "extra": ' + deep + b"}")
