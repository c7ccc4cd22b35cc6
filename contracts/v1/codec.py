"""JSON codecs for the v1 models, built once; every decode error is a ``ContractError``."""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from contracts.v1._base import ContractError, Struct
from contracts.v1.commands import Command, CommandEnvelope, CommandResult
from contracts.v1.events import EVENT_PAYLOADS, EventEnvelope
from contracts.v1.fleet import MowerLink, MowerListReply, MowerListRequest, MowerRegistration
from contracts.v1.sites import SiteAreasReply, SiteAreasRequest
from contracts.v1.subjects import EVENT_PREFIX
from contracts.v1.telemetry import MowerState

__all__ = [
    "decode",
    "decode_command",
    "decode_command_body",
    "decode_event",
    "decode_result",
    "decode_state",
    "encode",
]

T = TypeVar("T")

_encoder = msgspec.json.Encoder()
_command = msgspec.json.Decoder(CommandEnvelope)
_result = msgspec.json.Decoder(CommandResult)
_state = msgspec.json.Decoder(MowerState)
_command_body = msgspec.json.Decoder(Command)
_decoders: dict[type[Any], msgspec.json.Decoder[Any]] = {
    CommandEnvelope: _command,
    CommandResult: _result,
    MowerState: _state,
    MowerRegistration: msgspec.json.Decoder(MowerRegistration),
    MowerLink: msgspec.json.Decoder(MowerLink),
    MowerListRequest: msgspec.json.Decoder(MowerListRequest),
    MowerListReply: msgspec.json.Decoder(MowerListReply),
    SiteAreasRequest: msgspec.json.Decoder(SiteAreasRequest),
    SiteAreasReply: msgspec.json.Decoder(SiteAreasReply),
}


class _EventHead(msgspec.Struct):
    type: str
    version: int = 1


_event_head = msgspec.json.Decoder(_EventHead)
_event_decoders: dict[tuple[str, int], msgspec.json.Decoder[EventEnvelope[Any]]] = {
    key: msgspec.json.Decoder(EventEnvelope[payload])  # type: ignore[valid-type]
    for key, payload in EVENT_PAYLOADS.items()
}


def encode(message: Struct) -> bytes:
    """Encode a v1 model as JSON."""
    return _encoder.encode(message)


def _run(decoder: msgspec.json.Decoder[T], data: bytes | str) -> T:
    try:
        decoded: T = decoder.decode(data)
    except msgspec.DecodeError as err:
        raise ContractError(str(err)) from err
    except RecursionError:
        # A document nested a thousand levels deep (in a free-form field such as ``raw``)
        # is as undecodable as a malformed one: terminated, never retried.
        raise ContractError("nested too deeply to decode") from None
    return decoded


def decode(data: bytes | str, model: type[T]) -> T:
    """Decode ``data`` as ``model``, one of the fixed-type v1 models (``TypeError`` else)."""
    decoder: msgspec.json.Decoder[T] | None = _decoders.get(model)
    if decoder is None:
        raise TypeError(f"{model.__name__} is not a fixed-type v1 model")
    return _run(decoder, data)


def decode_command(data: bytes | str) -> CommandEnvelope:
    """Decode and validate a ``CommandEnvelope``."""
    return _run(_command, data)


def decode_command_body(data: bytes | str) -> Command:
    """Decode a bare command (``{"kind": ..., ...}``)."""
    return _run(_command_body, data)


def decode_result(data: bytes | str) -> CommandResult:
    """Decode a ``CommandResult``."""
    return _run(_result, data)


def decode_state(data: bytes | str) -> MowerState:
    """Decode a ``MowerState``."""
    return _run(_state, data)


def decode_event(data: bytes | str, *, subject: str | None = None) -> EventEnvelope[Any]:
    """Decode an ``EventEnvelope`` with the payload model its ``type`` and ``version`` name.

    With ``subject`` (the one it came on), its ``type`` must be the one the subject names:
    bus permissions are granted by subject, so a consumer that went by the body alone
    would let a publisher of ``event.mower.connected`` remove a mower.
    """
    head = _run(_event_head, data)
    if subject is not None and subject != f"{EVENT_PREFIX}{head.type}":
        raise ContractError(f"subject {subject!r} carries a {head.type!r} event")
    decoder = _event_decoders.get((head.type, head.version))
    if decoder is None:
        raise ContractError(f"`type` {head.type!r} version {head.version} is not a v1 event")
    return _run(decoder, data)
