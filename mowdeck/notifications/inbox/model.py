"""What the inbox stores hold and hand out: pending events, inbox items, pages and cursors."""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import datetime

import msgspec

from mowdeck.notifications.errors import NotificationsError
from mowdeck.notifications.rules.events import Param, RuleEvent
from mowdeck.notifications.rules.kinds import Kind, Severity

__all__ = [
    "Completion",
    "CursorError",
    "InboxCursor",
    "InboxEntry",
    "InboxItem",
    "InboxPage",
    "PendingEvent",
]


class PendingEvent(msgspec.Struct, frozen=True, kw_only=True):
    """An event waiting for its fan-out; ``attempts`` counts its claims, this one included."""

    id: int
    event: RuleEvent
    attempts: int


class InboxEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One recipient of a pending event, as the fan-out decided."""

    user_id: str
    held_by_quiet_hours: bool = False


class Completion(msgspec.Struct, frozen=True, kw_only=True):
    """A claimed pending event with its recipients, ready to be written to the inbox."""

    pending_id: int
    event: RuleEvent
    entries: tuple[InboxEntry, ...] = ()


class InboxItem(msgspec.Struct, frozen=True, kw_only=True):
    """A notification in a user's inbox; rendered per reader from key and parameters."""

    id: uuid.UUID
    user_id: str
    account_id: uuid.UUID
    mower_id: uuid.UUID
    kind: Kind
    severity: Severity
    dedupe_key: str
    message_key: str
    params: dict[str, Param]
    occurred_at: datetime
    read: bool = False
    held_by_quiet_hours: bool = False

    @classmethod
    def of(
        cls, event: RuleEvent, item_id: uuid.UUID, user_id: str, *, held_by_quiet_hours: bool
    ) -> InboxItem:
        """The new, unread item ``item_id`` of ``event`` in the inbox of ``user_id``."""
        return cls(
            id=item_id,
            user_id=user_id,
            account_id=event.account_id,
            mower_id=event.mower_id,
            kind=event.kind,
            severity=event.severity,
            dedupe_key=event.dedupe_key,
            message_key=event.message_key,
            params=dict(event.params),
            occurred_at=event.occurred_at,
            held_by_quiet_hours=held_by_quiet_hours,
        )


class CursorError(NotificationsError, ValueError):
    """An inbox cursor that this service did not hand out."""


class InboxCursor(msgspec.Struct, frozen=True):
    """Where an inbox page continues: behind the item at ``(occurred_at, id)``."""

    occurred_at: datetime
    id: uuid.UUID

    def encode(self) -> str:
        """The cursor as an opaque URL-safe token."""
        text = f"{self.occurred_at.isoformat()}|{self.id}"
        return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, token: str) -> InboxCursor:
        """The cursor of a token from ``encode``; ``CursorError`` for anything else."""
        try:
            padded = token + "=" * (-len(token) % 4)
            text = base64.urlsafe_b64decode(padded.encode("ascii")).decode()
            at, _, ident = text.partition("|")
            occurred_at = datetime.fromisoformat(at)
            if occurred_at.tzinfo is None:
                raise ValueError("naive time")
            return cls(occurred_at, uuid.UUID(ident))
        except (ValueError, UnicodeError, binascii.Error) as err:
            raise CursorError("not a cursor of this inbox") from err

    @classmethod
    def after(cls, item: InboxItem) -> InboxCursor:
        """The cursor that continues behind ``item``."""
        return cls(item.occurred_at, item.id)


class InboxPage(msgspec.Struct, frozen=True):
    """Inbox items newest first; ``next`` continues the listing when there is more."""

    items: list[InboxItem]
    next: InboxCursor | None = None
