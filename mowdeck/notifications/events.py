"""What the rules decide: events to notify, occurrences suppressed, and the watch after."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

import msgspec

from mowdeck.notifications.kinds import Kind, Severity
from mowdeck.notifications.watch import MowerWatch

__all__ = ["Outcome", "Param", "RuleEvent", "SuppressReason", "Suppressed"]

Param = str | int | float
"""A message parameter: JSON-storable. Times are ISO 8601 strings in UTC, durations are
whole seconds, percentages whole numbers."""

SuppressReason = Literal["cooldown", "first_state"]


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


class Outcome(msgspec.Struct, frozen=True):
    """The watch after an evaluation, the events to store, the suppressions to count."""

    watch: MowerWatch
    events: list[RuleEvent] = msgspec.field(default_factory=list)
    suppressed: list[Suppressed] = msgspec.field(default_factory=list)
