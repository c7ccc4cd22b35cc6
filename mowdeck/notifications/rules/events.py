"""What the rules decide: events to notify, occurrences suppressed, and the watch after."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Generic, Literal, TypeVar

import msgspec

from mowdeck.notifications.rules.kinds import Kind, Severity
from mowdeck.notifications.rules.watch import MowerWatch

__all__ = [
    "AlarmChange",
    "AlarmChangeKind",
    "IgnoreReason",
    "Outcome",
    "Param",
    "RuleEvent",
    "SuppressReason",
    "Suppressed",
]

Param = str | int | float
"""A message parameter: JSON-storable. Times are ISO 8601 strings in UTC, durations are
whole seconds, percentages whole numbers."""

SuppressReason = Literal["cooldown", "first_state"]
IgnoreReason = Literal["not_newer", "from_the_future"]
"""Why a state changed nothing: not newer than the watch (a redelivery, a heartbeat of a
lost link, an older state), or observed too far ahead of the service's clock."""


class RuleEvent(msgspec.Struct, frozen=True, kw_only=True):
    """Something a mower's subscribers should hear about.

    ``dedupe_key`` names the occurrence (kind, mower and what happened when): an event
    handled twice is stored once per user. ``message_key`` and ``params`` are rendered per
    recipient by ``templates``; every message also takes ``mower`` (the mower's name),
    which the rules do not know and the fan-out adds from the registry.
    """

    kind: Kind
    mower_id: uuid.UUID
    account_id: uuid.UUID
    severity: Severity
    dedupe_key: str
    message_key: str
    params: dict[str, Param] = msgspec.field(default_factory=dict)
    occurred_at: datetime


class Suppressed(msgspec.Struct, frozen=True, kw_only=True):
    """An occurrence that was due but not sent, and why (for the service's counters).

    A held-back occurrence is reported once, when it is first held; one sent later, when
    the cooldown is over, is then an ordinary event.
    """

    kind: Kind
    mower_id: uuid.UUID
    reason: SuppressReason
    dedupe_key: str
    at: datetime


AlarmChangeKind = Literal["raised", "updated", "cleared"]


class AlarmChange(msgspec.Struct, frozen=True, kw_only=True):
    """An alarm raised, updated by another firing, or cleared, for one mower's condition."""

    change: AlarmChangeKind
    mower_id: uuid.UUID
    account_id: uuid.UUID
    condition: str
    kind: Kind
    severity: Severity
    at: datetime
    # The mower's error code, for an ``error:<code>`` condition.
    code: str | None = None
    # For a cleared alarm: when it was raised (its time to clear).
    raised_at: datetime | None = None
    params: dict[str, Param] = msgspec.field(default_factory=dict)


W_co = TypeVar("W_co", bound=MowerWatch | None, covariant=True)


class Outcome(msgspec.Struct, Generic[W_co], frozen=True):
    """The watch after an evaluation, the events to store, the suppressions to count.

    ``watch`` is the watch given when nothing changed (the same object), and None only
    when there was none and the state was ignored. ``ignored`` says why a state was.
    """

    watch: W_co
    events: list[RuleEvent] = msgspec.field(default_factory=list)
    suppressed: list[Suppressed] = msgspec.field(default_factory=list)
    ignored: IgnoreReason | None = None
    # The alarms raised, updated or cleared (``rules/alarms.py``), stored with the watch.
    alarms: tuple[AlarmChange, ...] = ()
