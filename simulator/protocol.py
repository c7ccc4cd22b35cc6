"""The device protocol: JSON frames over one WebSocket per mower (docs/device-protocol.md).

Every frame is an object with a ``type`` tag and the protocol version ``v``. The mower
sends ``hello``, ``state``, ``outcome`` and ``error``; the gateway sends ``command``.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

import msgspec

from contracts.v1 import AwareDatetime, Command, MowerState

__all__ = [
    "PROTOCOL_VERSION",
    "CommandFrame",
    "DeviceFrame",
    "ErrorFrame",
    "Frame",
    "Hello",
    "OutcomeFrame",
    "ProtocolError",
    "StateFrame",
    "decode_device_frame",
    "decode_gateway_frame",
    "encode_frame",
]

PROTOCOL_VERSION = 1
Reason = Annotated[str, msgspec.Meta(max_length=1000)]


class ProtocolError(ValueError):
    """A frame could not be read; ``command_id`` is set when the frame still named one."""

    def __init__(self, reason: str, command_id: uuid.UUID | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.command_id = command_id


class Frame(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """Base of every frame: the ``type`` tag and the protocol version."""

    v: int = PROTOCOL_VERSION


class Hello(Frame, frozen=True, tag="hello"):
    """First frame of the mower after the WebSocket opens."""

    mower_id: uuid.UUID
    name: str | None = None
    firmware: str | None = None
    protocols: list[int] = msgspec.field(default_factory=lambda: [PROTOCOL_VERSION])


class StateFrame(Frame, frozen=True, tag="state"):
    """The mower's state, on every change and periodically."""

    state: MowerState


class OutcomeFrame(Frame, frozen=True, tag="outcome"):
    """What the mower did with one command."""

    command_id: uuid.UUID
    status: Literal["executed", "failed"]
    at: AwareDatetime
    reason: Reason | None = None


class ErrorFrame(Frame, frozen=True, tag="error"):
    """A frame the receiver could not use, with the reason; the link stays up."""

    reason: Reason
    command_id: uuid.UUID | None = None


class CommandFrame(Frame, frozen=True, tag="command"):
    """A command from the gateway; answered by exactly one ``outcome``."""

    command_id: uuid.UUID
    command: Command
    expires_at: AwareDatetime | None = None


DeviceFrame = Hello | StateFrame | OutcomeFrame | ErrorFrame


class _Head(msgspec.Struct):
    # Read first and leniently, so a broken command still gets an outcome with its id.
    type: str | None = None
    v: int | None = None
    command_id: str | None = None


_encoder = msgspec.json.Encoder()
_head = msgspec.json.Decoder(_Head)
_gateway = msgspec.json.Decoder(CommandFrame)
_device = msgspec.json.Decoder(DeviceFrame)


def encode_frame(frame: Frame) -> bytes:
    """Encode a frame as JSON."""
    return _encoder.encode(frame)


def _command_id(head: _Head) -> uuid.UUID | None:
    try:
        return uuid.UUID(head.command_id) if head.command_id else None
    except ValueError:
        return None


def decode_gateway_frame(data: bytes | str) -> CommandFrame:
    """Decode a frame sent to a mower, or raise ``ProtocolError`` with a reason."""
    try:
        head = _head.decode(data)
    except msgspec.DecodeError as err:
        raise ProtocolError(f"malformed frame: {err}") from err
    except RecursionError:
        raise ProtocolError("malformed frame: nested too deeply") from None
    # The id is parsed from the head only for an error: a good frame carries it decoded.
    if head.v is not None and head.v != PROTOCOL_VERSION:
        raise ProtocolError(f"unsupported protocol version {head.v}", _command_id(head))
    if head.type != "command":
        raise ProtocolError(f"unexpected frame type {head.type!r}", _command_id(head))
    try:
        return _gateway.decode(data)
    except msgspec.DecodeError as err:
        raise ProtocolError(f"invalid command: {err}", _command_id(head)) from err
    except RecursionError:
        raise ProtocolError("invalid command: nested too deeply", _command_id(head)) from None


def decode_device_frame(data: bytes | str) -> DeviceFrame:
    """Decode a frame sent by a mower, or raise ``ProtocolError`` with a reason."""
    try:
        frame: DeviceFrame = _device.decode(data)
    except msgspec.DecodeError as err:
        raise ProtocolError(f"malformed frame: {err}") from err
    except RecursionError:
        raise ProtocolError("malformed frame: nested too deeply") from None
    if frame.v != PROTOCOL_VERSION:
        raise ProtocolError(f"unsupported protocol version {frame.v}")
    return frame
