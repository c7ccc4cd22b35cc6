"""An alarm, the states it goes through, and where a listing of them continues."""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import datetime
from typing import Literal

import msgspec

from mowdeck.notifications.rules.events import Param
from mowdeck.notifications.rules.kinds import Kind, Severity

__all__ = ["ALARM_STATES", "Alarm", "AlarmCursor", "AlarmPage", "AlarmQuery", "AlarmState"]

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


class AlarmQuery(msgspec.Struct, frozen=True, kw_only=True):
    """Which alarms of an account to list: ``mowers`` None is every mower."""

    account_id: uuid.UUID
    mowers: frozenset[uuid.UUID] | None = None
    states: frozenset[AlarmState] = frozenset({"active", "acknowledged"})
    severity: Severity | None = None
    limit: int = 50


class CursorError(ValueError):
    """A cursor that this listing did not give out."""


class AlarmCursor(msgspec.Struct, frozen=True):
    """Where a listing continues: behind the alarm at ``(latest_at, id)``, newest first."""

    latest_at: datetime
    id: uuid.UUID

    def encode(self) -> str:
        """The cursor as an opaque URL-safe token."""
        text = f"{self.latest_at.isoformat()}|{self.id}"
        return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, token: str) -> AlarmCursor:
        """The cursor of a token from ``encode``; ``CursorError`` for anything else."""
        try:
            padded = token + "=" * (-len(token) % 4)
            text = base64.urlsafe_b64decode(padded.encode("ascii")).decode()
            at, _, ident = text.partition("|")
            latest_at = datetime.fromisoformat(at)
            if latest_at.tzinfo is None:
                raise ValueError("naive time")
            return cls(latest_at, uuid.UUID(ident))
        except (ValueError, UnicodeError, binascii.Error) as err:
            raise CursorError("not a cursor of this listing") from err


class AlarmPage(msgspec.Struct, frozen=True):
    """Alarms newest first (by their latest telling); ``next`` continues when there is more."""

    items: list[Alarm]
    next: AlarmCursor | None = None
