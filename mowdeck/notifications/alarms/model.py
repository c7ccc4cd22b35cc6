"""An alarm, the states it goes through, and where a listing of them continues."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

import msgspec

from mowdeck.notifications.rules.events import Param
from mowdeck.notifications.rules.kinds import Kind, Severity

__all__ = [
    "ALARM_STATES",
    "Alarm",
    "AlarmCursor",
    "AlarmPage",
    "AlarmPageView",
    "AlarmQuery",
    "AlarmState",
    "AlarmView",
]

AlarmState = Literal["active", "acknowledged", "cleared"]
ALARM_STATES: tuple[AlarmState, ...] = AlarmState.__args__  # type: ignore[attr-defined]


class Alarm(msgspec.Struct, frozen=True, kw_only=True):
    """One alarm: raised for a mower's condition, acknowledged, cleared when it ended.

    ``state`` is ``active`` until someone acknowledges it, ``acknowledged`` then, and
    ``cleared`` once the condition ended (acknowledged or not: ``acknowledged_at`` says).
    ``count`` counts the tellings of the condition while it was open.
    """

    id: uuid.UUID
    account_id: uuid.UUID
    mower_id: uuid.UUID
    condition: str
    kind: Kind
    severity: Severity
    state: AlarmState
    first_at: datetime
    latest_at: datetime
    count: int = 1
    code: str | None = None
    params: dict[str, Param] = msgspec.field(default_factory=dict)
    acknowledged_by: str | None = None
    acknowledged_at: datetime | None = None
    comment: str | None = None
    assignee: str | None = None
    assigned_by: str | None = None
    assigned_at: datetime | None = None
    cleared_at: datetime | None = None
    # When it was told to the account's admins, unacknowledged (``alarms/escalation.py``).
    escalated_at: datetime | None = None


class AlarmQuery(msgspec.Struct, frozen=True, kw_only=True):
    """Which alarms of an account to list: ``mowers`` None is every mower."""

    account_id: uuid.UUID
    mowers: frozenset[uuid.UUID] | None = None
    states: frozenset[AlarmState] = frozenset({"active", "acknowledged"})
    severity: Severity | None = None
    limit: int = 50


class AlarmCursor(msgspec.Struct, frozen=True, array_like=True):
    """Where a listing continues: behind the alarm at ``(latest_at, id)``, newest first
    (handed to clients as ``kit.paging``'s opaque cursor)."""

    latest_at: datetime
    id: uuid.UUID


class AlarmPage(msgspec.Struct, frozen=True):
    """Alarms newest first (by their latest telling); ``next`` continues when there is more."""

    items: list[Alarm]
    next: AlarmCursor | None = None


class AlarmView(msgspec.Struct, frozen=True, kw_only=True):
    """An alarm as the API shows it (the account is the caller's, not repeated)."""

    id: uuid.UUID
    mower_id: uuid.UUID
    condition: str
    kind: Kind
    severity: Severity
    state: AlarmState
    first_at: datetime
    latest_at: datetime
    count: int
    code: str | None
    params: dict[str, Param]
    acknowledged_by: str | None
    acknowledged_at: datetime | None
    comment: str | None
    assignee: str | None
    assigned_by: str | None
    assigned_at: datetime | None
    cleared_at: datetime | None
    escalated_at: datetime | None = None

    @classmethod
    def of(cls, alarm: Alarm) -> AlarmView:
        """The view of ``alarm``."""
        fields = msgspec.structs.asdict(alarm)
        del fields["account_id"]
        return cls(**fields)


class AlarmPageView(msgspec.Struct, frozen=True, kw_only=True):
    """A page of alarms, newest first; ``next_after`` continues it while ``has_more``."""

    items: list[AlarmView]
    next_after: str | None
    has_more: bool
