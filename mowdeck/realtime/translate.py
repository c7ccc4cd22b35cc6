"""From a bus message to what a client sees: the event type, the mower and the JSON body.

Pure: the hub's live subscriptions and a resuming client's replay read the same streams
and must turn each message into the same event.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Final, NamedTuple

import msgspec

from contracts.v1 import (
    AlarmChanged,
    ContractError,
    EventEnvelope,
    MowerLink,
    NotificationSent,
    decode_event,
    decode_result,
    decode_state,
)
from contracts.v1.subjects import EVENT_PREFIX, RESULT_PREFIX, TELEMETRY_PREFIX
from mowdeck.realtime.frames import FrameType

__all__ = [
    "LINK_TYPES",
    "WATCHED_EVENTS",
    "Item",
    "alarm_item",
    "command_item",
    "event_item",
    "link_item",
    "notification_item",
    "state_item",
]

LINK_TYPES: Final = {"mower.connected": True, "mower.disconnected": False}
WATCHED_EVENTS: Final = frozenset(
    {
        *LINK_TYPES,
        "notifications.sent",
        "notifications.alarm_changed",
        "mower.registered",
        "mower.updated",
        "mower.removed",
        "identity.grants.changed",
    }
)
"""Event types the hub decodes; every other event only moves the position."""

_encoder = msgspec.json.Encoder()


class Item(NamedTuple):
    """An event for clients: ``user_id`` set when only that user may see it, ``account_id``
    when the message names its account (a state)."""

    type: FrameType
    mower_id: uuid.UUID
    data: bytes
    user_id: str | None = None
    account_id: uuid.UUID | None = None


class StateItem(NamedTuple):
    """A state with what the hub keeps of it."""

    item: Item
    account_id: uuid.UUID
    observed_at: datetime


def _mower(subject: str, prefix: str) -> uuid.UUID | None:
    if not subject.startswith(prefix):
        return None
    try:
        return uuid.UUID(subject[len(prefix) :])
    except ValueError:
        return None


def state_item(subject: str, data: bytes) -> StateItem | None:
    """A ``state`` event from ``telemetry.mower.<id>``, or None when it is none."""
    mower_id = _mower(subject, TELEMETRY_PREFIX)
    if mower_id is None:
        return None
    try:
        state = decode_state(data)
    except ContractError:
        return None
    if state.mower_id != mower_id:
        return None
    account_id = state.account_id
    item = Item("state", mower_id, data.strip(), account_id=account_id)
    return StateItem(item, account_id, state.observed_at)


def command_item(subject: str, data: bytes) -> Item | None:
    """A ``command`` event from ``command.result.mower.<id>`` (commands themselves: None)."""
    mower_id = _mower(subject, RESULT_PREFIX)
    if mower_id is None:
        return None
    try:
        result = decode_result(data)
    except ContractError:
        return None
    if result.mower_id != mower_id:
        return None
    return Item("command", mower_id, data.strip())


def event_item(subject: str, data: bytes) -> EventEnvelope[Any] | None:
    """The decoded event of a watched type, or None."""
    if not subject.startswith(EVENT_PREFIX) or subject[len(EVENT_PREFIX) :] not in WATCHED_EVENTS:
        return None
    try:
        return decode_event(data, subject=subject)
    except ContractError:
        return None


class _Link(msgspec.Struct):
    mower_id: uuid.UUID
    connected: bool
    at: datetime
    reason: str | None


class _Notification(msgspec.Struct):
    notification_id: uuid.UUID
    mower_id: uuid.UUID
    kind: str
    severity: str
    title: str
    body: str
    at: datetime


def link_item(event: EventEnvelope[Any]) -> Item | None:
    """A ``link`` event from ``mower.connected`` or ``mower.disconnected``."""
    connected = LINK_TYPES.get(event.type)
    link = event.payload
    if connected is None or not isinstance(link, MowerLink):
        return None
    body = _Link(link.mower_id, connected, event.occurred_at, link.reason)
    return Item("link", link.mower_id, _encoder.encode(body))


def notification_item(event: EventEnvelope[Any]) -> Item | None:
    """A ``notification`` event (for its user alone) from ``notifications.sent``."""
    sent = event.payload
    if event.type != "notifications.sent" or not isinstance(sent, NotificationSent):
        return None
    body = _Notification(
        sent.notification_id,
        sent.mower_id,
        sent.kind,
        sent.severity,
        sent.title,
        sent.body,
        event.occurred_at,
    )
    return Item("notification", sent.mower_id, _encoder.encode(body), sent.user_id)


def alarm_item(event: EventEnvelope[Any]) -> Item | None:
    """An ``alarm`` event from ``notifications.alarm_changed``: seen by every stream that
    shows its mower, as a state is (the payload as published)."""
    changed = event.payload
    if event.type != "notifications.alarm_changed" or not isinstance(changed, AlarmChanged):
        return None
    return Item("alarm", changed.mower_id, _encoder.encode(changed))
