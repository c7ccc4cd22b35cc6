"""Pure rules of the registry and of issuing commands: request bodies, checks, events."""

from __future__ import annotations

import re
import uuid
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Annotated, Any, TypeVar

import msgspec

from contracts.v1 import (
    COMMAND_KINDS,
    Command,
    CommandEnvelope,
    Connection,
    ContractError,
    EventEnvelope,
    MowerRegistration,
    decode_command,
    encode,
)
from contracts.v1.subjects import event_subject
from mowdeck.devices.endpoints import EndpointPolicy
from mowdeck.fleet.errors import InvalidRequestError
from mowdeck.fleet.ports import RegistryEvent
from mowdeck.kit.http import decode_as_json_schema
from mowdeck.kit.storable import may_hold_nul, nul_field

__all__ = [
    "MAX_OPTIONS_BYTES",
    "MAX_OPTIONS_DEPTH",
    "MIN_TTL_SECONDS",
    "PRODUCER",
    "CommandRequest",
    "PatchRequest",
    "RegisterRequest",
    "apply_patch",
    "check_connection",
    "command_ttl",
    "decode_body",
    "encode_command",
    "issue_command",
    "new_registration",
    "parse_wait",
    "registry_event",
]

PRODUCER = "fleet"
T = TypeVar("T")

# A registration travels whole in every registry event and every shard-list page: its
# options are bounded far below NATS's payload limit (1 MB by default).
MAX_OPTIONS_BYTES = 16 * 1024
MAX_OPTIONS_DEPTH = 32
# A shorter lifetime can run out while the command is being recorded, before it is sent.
MIN_TTL_SECONDS = 1.0

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=100)]


class RegisterRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=False):
    """Body of ``POST /v1/mowers``."""

    name: Name
    connection: Connection
    mower_id: uuid.UUID | None = None


class PatchRequest(msgspec.Struct, frozen=True, kw_only=True):
    """Body of ``PATCH /v1/mowers/{id}``: the fields to change."""

    name: Name | None = None
    connection: Connection | None = None
    # Absent: unchanged; null: the mower leaves its site; an id: a site of the account.
    site_id: uuid.UUID | msgspec.UnsetType | None = msgspec.UNSET


class CommandRequest(msgspec.Struct, frozen=True, kw_only=True):
    """Body of ``POST /v1/mowers/{id}/commands``."""

    command: Command
    ttl_s: Annotated[float, msgspec.Meta(gt=0)] | None = None
    correlation_id: uuid.UUID | None = None


_AT = re.compile(r"^(?P<text>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_MISSING = re.compile(r"missing required field `(?P<field>[^`]+)`")
_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")


def _field_of(message: str) -> tuple[str, str]:
    match = _AT.match(message)
    text, path = (match.group("text"), match.group("path") or "") if match else (message, "")
    field = path.lstrip(".").replace("[", ".").replace("]", "")
    missing = _MISSING.search(text)
    if missing:
        field = f"{field}.{missing.group('field')}" if field else missing.group("field")
    return field or "body", text


def decode_body(data: bytes, model: type[T]) -> T:
    """Decode a request body as ``model``; raises ``InvalidRequestError`` naming the field."""
    try:
        return _decode(data, model)
    except RecursionError:
        # Thousands of nested arrays or objects: malformed for us, like invalid JSON.
        raise InvalidRequestError("", "the body is nested too deeply") from None


def _decode(data: bytes, model: type[T]) -> T:
    try:
        decoded = decode_as_json_schema(data, model)
    except msgspec.ValidationError as err:
        field, text = _field_of(str(err))
        if field == "command.kind":
            # Name the valid kinds: "Invalid value 'start'" alone leaves the caller guessing.
            text += f" (valid kinds: {', '.join(COMMAND_KINDS)})"
        raise InvalidRequestError(field, f"`{field}`: {text}") from err
    except msgspec.DecodeError as err:
        # Malformed JSON is not a field's fault; the caller answers 400 for field "body".
        raise InvalidRequestError("", f"the body is not valid JSON: {err}") from err
    except ContractError as err:
        field, text = _field_of(str(err))
        found = re.search(r"`([^`]+)`", text)
        raise InvalidRequestError(found.group(1) if found else field, text) from err
    # Valid JSON and a valid contract, but PostgreSQL cannot store it (and the events and
    # commands built from it would carry it to every consumer).
    if may_hold_nul(data) and (nul := nul_field(decoded)) is not None:
        raise InvalidRequestError(nul, f"`{nul}` holds a NUL character (\\u0000)")
    return decoded


def check_connection(
    connection: Connection, installed: Collection[str], endpoints: EndpointPolicy | None = None
) -> None:
    """Refuse a connection kind no installed adapter serves, oversized options, and a
    device URL the gateways would not dial (``MOWDECK_GATEWAY_DEVICE_HOSTS``)."""
    if connection.kind not in installed:
        kinds = ", ".join(sorted(installed)) or "none"
        raise InvalidRequestError(
            "connection.kind",
            f"`connection.kind` {connection.kind!r} is not an installed adapter "
            f"(installed: {kinds})",
        )
    too_deep = InvalidRequestError(
        "connection.options",
        f"`connection.options` nests more than {MAX_OPTIONS_DEPTH} levels of objects and lists",
    )
    try:
        size = len(msgspec.json.encode(connection.options))
    except RecursionError:
        raise too_deep from None
    if size > MAX_OPTIONS_BYTES:
        raise InvalidRequestError(
            "connection.options",
            f"`connection.options` encodes to {size} bytes; at most {MAX_OPTIONS_BYTES} bytes "
            f"({MAX_OPTIONS_BYTES // 1024} KiB) are accepted",
        )
    if _depth(connection.options) > MAX_OPTIONS_DEPTH:
        raise too_deep
    refusal = endpoints.refusal(connection) if endpoints is not None else None
    if refusal is not None:
        raise InvalidRequestError(refusal.field, refusal.detail)


def _depth(value: Any) -> int:
    # Iterative: the value came from a client, a recursive walk could exhaust the stack.
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Collection[Any] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in children)
    return deepest


def new_registration(
    request: RegisterRequest,
    account_id: uuid.UUID,
    installed: Collection[str],
    endpoints: EndpointPolicy | None = None,
) -> MowerRegistration:
    """The registration a register request makes in ``account_id``."""
    check_connection(request.connection, installed, endpoints)
    return MowerRegistration(
        mower_id=request.mower_id or uuid.uuid4(),
        account_id=account_id,
        name=request.name,
        connection=request.connection,
    )


def apply_patch(
    current: MowerRegistration,
    patch: PatchRequest,
    installed: Collection[str],
    endpoints: EndpointPolicy | None = None,
) -> MowerRegistration:
    """``current`` with the patch's fields; refuses an empty patch."""
    if patch.name is None and patch.connection is None and patch.site_id is msgspec.UNSET:
        raise InvalidRequestError("body", "send `name`, `connection`, `site_id` or some of them")
    if patch.connection is not None:
        check_connection(patch.connection, installed, endpoints)
    return msgspec.structs.replace(
        current,
        name=patch.name if patch.name is not None else current.name,
        connection=patch.connection if patch.connection is not None else current.connection,
        site_id=current.site_id if patch.site_id is msgspec.UNSET else patch.site_id,
    )


def registry_event(
    event_type: str,
    registration: MowerRegistration,
    *,
    now: datetime,
    correlation_id: uuid.UUID | None = None,
) -> RegistryEvent:
    """A registry event (``mower.registered/updated/removed``), stored with its change."""
    event = EventEnvelope.new(
        event_type,
        registration,
        producer=PRODUCER,
        now=now,
        account_id=registration.account_id,
        correlation_id=correlation_id,
    )
    return RegistryEvent(
        event_id=event.id, subject=event_subject(event_type), body=encode(event), created_at=now
    )


def command_ttl(requested: float | None, *, default: float, maximum: float) -> timedelta:
    """The lifetime of a command: the request's ``ttl_s`` within the maximum, else the default."""
    if requested is None:
        return timedelta(seconds=default)
    if requested < MIN_TTL_SECONDS:
        raise InvalidRequestError("ttl_s", f"`ttl_s` must be at least {MIN_TTL_SECONDS:g} second")
    if requested > maximum:
        raise InvalidRequestError("ttl_s", f"`ttl_s` must be at most {maximum:g} seconds")
    return timedelta(seconds=requested)


def parse_wait(raw: str | None, *, maximum: float) -> float:
    """Seconds to wait for a final result from the ``wait`` query parameter (0 = none)."""
    if raw is None or raw == "":
        return 0.0
    # float() would also take "1_0", "1e1", " 1", "+1", "inf" and non-ASCII digits.
    if _DECIMAL.fullmatch(raw) is None:
        raise InvalidRequestError("wait", "`wait` must be a number of seconds, such as 2.5")
    value = float(raw)
    if value > maximum:
        raise InvalidRequestError("wait", f"`wait` must be between 0 and {maximum:g} seconds")
    return value


def issue_command(
    request: CommandRequest,
    registration: MowerRegistration,
    *,
    issued_by: str,
    now: datetime,
    ttl: timedelta,
) -> CommandEnvelope:
    """The envelope of a command request for a registered mower."""
    try:
        return CommandEnvelope.issue(
            mower_id=registration.mower_id,
            account_id=registration.account_id,
            command=request.command,
            issued_by=issued_by,
            now=now,
            ttl=ttl,
            correlation_id=request.correlation_id,
        )
    except (ContractError, msgspec.ValidationError) as err:
        found = re.search(r"`([^`]+)`", str(err))
        raise InvalidRequestError(found.group(1) if found else "command", str(err)) from err


def encode_command(envelope: CommandEnvelope) -> bytes:
    """The envelope as published, checked against the contract as a consumer decodes it.

    The constructor checks expiry and priority but not field limits (for example the
    length of ``issued_by``); decoding what will be sent checks everything.
    """
    body = encode(envelope)
    try:
        decode_command(body)
    except ContractError as err:
        field, text = _field_of(str(err))
        raise InvalidRequestError(field, f"`{field}`: {text}") from err
    return body
