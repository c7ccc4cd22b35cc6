"""The in-memory inbox: the same contract as PostgreSQL, for unit tests.

``complete_many`` hands the new items of each event to the delivery queue it is given
(the delivery part's, ``InMemoryDeliveries.queue``) before it returns, with nothing
awaited in between: one transaction, as in PostgreSQL (``ports.py``).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import msgspec

from mowdeck.notifications.inbox.model import (
    Completion,
    InboxCursor,
    InboxItem,
    InboxPage,
    PendingEvent,
)
from mowdeck.notifications.inbox.ports import InboxStore, PendingStore, PreferencesStore
from mowdeck.notifications.inbox.preferences import Preferences
from mowdeck.notifications.inbox.recipients import Subscriber
from mowdeck.notifications.rules.events import RuleEvent

__all__ = ["InMemoryInbox", "MemoryDeliveryQueue"]

MemoryDeliveryQueue = Callable[[RuleEvent, Sequence[tuple[str, bool]]], object]
"""Queues the deliveries of an event's new items ``(user_id, held by quiet hours)``."""


@dataclass
class _Pending:
    event: RuleEvent
    attempts: int = 0
    claimed_until: datetime | None = None


def _newest_first(item: InboxItem) -> tuple[datetime, int]:
    return item.occurred_at, item.id.int


class InMemoryInbox(PendingStore, InboxStore, PreferencesStore):
    """Pending events, inbox items and preferences as dicts."""

    def __init__(self, *, deliveries: MemoryDeliveryQueue) -> None:
        self._deliveries = deliveries
        self.pending: dict[int, _Pending] = {}
        self.inbox: dict[uuid.UUID, InboxItem] = {}
        self.preferences: dict[str, tuple[uuid.UUID, Preferences]] = {}
        self._ids = itertools.count(1)

    # -- pending events --------------------------------------------------------------

    def add_pending(self, events: Sequence[RuleEvent]) -> None:
        """Queue events for their fan-out (what a watch transaction's commit does)."""
        for event in events:
            self.pending[next(self._ids)] = _Pending(event)

    async def claim_pending(
        self, now: datetime, limit: int, lease: timedelta
    ) -> list[PendingEvent]:
        """Claim unclaimed pending events, oldest first."""
        claimed: list[PendingEvent] = []
        for pending_id, row in sorted(self.pending.items()):
            if len(claimed) >= limit:
                break
            if row.claimed_until is not None and row.claimed_until > now:
                continue
            row.attempts += 1
            row.claimed_until = now + lease
            claimed.append(PendingEvent(id=pending_id, event=row.event, attempts=row.attempts))
        return claimed

    async def complete_many(
        self, completions: Sequence[Completion], inbox_limit: int
    ) -> list[list[InboxItem]]:
        """``complete_pending`` for several events at once (nothing awaits in between)."""
        taken = {(i.user_id, i.dedupe_key) for i in self.inbox.values()}
        new: list[list[InboxItem]] = []
        for done in completions:
            event, mine = done.event, []
            for entry in done.entries:
                if (entry.user_id, event.dedupe_key) in taken:
                    continue
                taken.add((entry.user_id, event.dedupe_key))
                item = InboxItem.of(
                    event,
                    uuid.uuid4(),
                    entry.user_id,
                    held_by_quiet_hours=entry.held_by_quiet_hours,
                )
                self.inbox[item.id] = item
                mine.append(item)
            self.pending.pop(done.pending_id, None)
            new.append(mine)
        for user_id in {item.user_id for mine in new for item in mine}:
            ordered = sorted(self._items_of(user_id), key=_newest_first, reverse=True)
            for old in ordered[inbox_limit:]:
                del self.inbox[old.id]
        # An item older than the user's newest ``inbox_limit`` is trimmed at once.
        kept = [[item for item in mine if item.id in self.inbox] for mine in new]
        for done, mine in zip(completions, kept, strict=True):
            self._deliveries(done.event, [(i.user_id, i.held_by_quiet_hours) for i in mine])
        return kept

    async def discard_pending(self, pending_id: int) -> bool:
        """Drop a pending event."""
        return self.pending.pop(pending_id, None) is not None

    # -- preferences -----------------------------------------------------------------

    def preferences_of(self, user_id: str) -> Preferences | None:
        """The user's saved preferences, at once (what the deliveries read of a user)."""
        row = self.preferences.get(user_id)
        return None if row is None else row[1]

    async def get_preferences(self, user_id: str) -> Preferences | None:
        """The user's saved preferences."""
        return self.preferences_of(user_id)

    async def put_preferences(
        self, user_id: str, account_id: uuid.UUID, preferences: Preferences
    ) -> None:
        """Save the user's preferences."""
        self.preferences[user_id] = (account_id, preferences)

    async def subscribers(self, account_id: uuid.UUID) -> list[Subscriber]:
        """The account's users with a scope."""
        return [
            Subscriber(user_id=user_id, account_id=account, preferences=prefs)
            for user_id, (account, prefs) in sorted(self.preferences.items())
            if account == account_id and prefs.scope != "none"
        ]

    async def subscribers_of(
        self, account_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, list[Subscriber]]:
        """``subscribers`` of several accounts."""
        return {a: await self.subscribers(a) for a in account_ids}

    # -- the inbox -------------------------------------------------------------------

    def _items_of(self, user_id: str) -> list[InboxItem]:
        return [item for item in self.inbox.values() if item.user_id == user_id]

    async def inbox_page(
        self, user_id: str, limit: int, cursor: InboxCursor | None = None
    ) -> InboxPage:
        """The user's items newest first behind ``cursor``."""
        items = sorted(self._items_of(user_id), key=_newest_first, reverse=True)
        if cursor is not None:
            edge = (cursor.occurred_at, cursor.id.int)
            items = [item for item in items if _newest_first(item) < edge]
        page = items[:limit]
        more = len(items) > limit
        return InboxPage(page, InboxCursor.after(page[-1]) if more and page else None)

    async def unread_count(self, user_id: str) -> int:
        """The user's unread items."""
        return sum(1 for item in self._items_of(user_id) if not item.read)

    async def mark_read(self, user_id: str, ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        """Mark the user's items among ``ids`` read."""
        mine: set[uuid.UUID] = set()
        for item_id in ids:
            item = self.inbox.get(item_id)
            if item is not None and item.user_id == user_id:
                self.inbox[item_id] = msgspec.structs.replace(item, read=True)
                mine.add(item_id)
        return mine

    # -- erasure (``erasure.py``) ----------------------------------------------------

    def delete_user_rows(self, user_id: str, /) -> int:
        """Delete the user's preferences and inbox."""
        deleted = 1 if self.preferences.pop(user_id, None) is not None else 0
        for item in self._items_of(user_id):
            del self.inbox[item.id]
            deleted += 1
        return deleted

    def delete_mower_rows(self, mower_id: uuid.UUID, /) -> int:
        """Delete the mower's pending events and inbox items, and drop it from every
        selection (not counted)."""
        deleted = 0
        for pending_id in [p for p, row in self.pending.items() if row.event.mower_id == mower_id]:
            del self.pending[pending_id]
            deleted += 1
        for item_id in [i for i, item in self.inbox.items() if item.mower_id == mower_id]:
            del self.inbox[item_id]
            deleted += 1
        for user_id, (account, prefs) in list(self.preferences.items()):
            if mower_id in prefs.mowers:
                kept = [m for m in prefs.mowers if m != mower_id]
                self.preferences[user_id] = (account, msgspec.structs.replace(prefs, mowers=kept))
        return deleted
