"""The in-memory store: the same contract as PostgreSQL, for unit tests and composition tests.

A watch transaction holds one lock over every watch (so claims never meet a held row)
and applies its writes when it commits; an exception inside it leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

import msgspec

from mowdeck.notifications.delivery.memory import InMemoryDeliveries
from mowdeck.notifications.inbox.model import (
    Completion,
    InboxCursor,
    InboxEntry,
    InboxItem,
    InboxPage,
    PendingEvent,
    Stamp,
    WatchWrite,
)
from mowdeck.notifications.inbox.preferences import Preferences
from mowdeck.notifications.inbox.recipients import Subscriber
from mowdeck.notifications.rules.events import RuleEvent
from mowdeck.notifications.rules.watch import MowerWatch

__all__ = ["InMemoryNotificationStore"]


@dataclass
class _Pending:
    event: RuleEvent
    attempts: int = 0
    claimed_until: datetime | None = None


_replace = msgspec.structs.replace


def _earlier(stored: datetime | None, new: datetime | None) -> datetime | None:
    # PostgreSQL's least(): NULL only when both are.
    if stored is None or new is None:
        return new if stored is None else stored
    return min(stored, new)


def _newest_first(item: InboxItem) -> tuple[datetime, int]:
    return item.occurred_at, item.id.int


class InMemoryNotificationStore(InMemoryDeliveries):
    """Notification tables as dicts."""

    def __init__(self) -> None:
        self._init_deliveries()
        self._lock = asyncio.Lock()
        self.watch_rows: dict[uuid.UUID, tuple[MowerWatch, datetime | None]] = {}
        self.versions: dict[uuid.UUID, int] = {}
        self.pending: dict[int, _Pending] = {}
        self.inbox: dict[uuid.UUID, InboxItem] = {}
        self.preferences: dict[str, tuple[uuid.UUID, Preferences]] = {}
        self._ids = itertools.count(1)

    # -- watches ---------------------------------------------------------------------

    @asynccontextmanager
    async def watches(self) -> AsyncIterator[_WatchTransaction]:
        """A watch transaction; its writes are applied on a clean exit."""
        async with self._lock:
            tx = _WatchTransaction(self)
            yield tx
            tx.commit()

    async def read_watches(self, mower_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, MowerWatch]:
        """The stored watches of ``mower_ids``."""
        return {m: self.watch_rows[m][0] for m in mower_ids if m in self.watch_rows}

    def add_pending(self, events: Sequence[RuleEvent]) -> None:
        """Queue events for their fan-out (what a watch transaction's commit does)."""
        for event in events:
            self.pending[next(self._ids)] = _Pending(event)

    # -- fan-out ---------------------------------------------------------------------

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

    async def complete_pending(
        self,
        pending_id: int,
        event: RuleEvent,
        entries: Sequence[InboxEntry],
        inbox_limit: int,
    ) -> list[InboxItem]:
        """Store the inbox items, drop the pending event, trim the users who got one."""
        done = Completion(pending_id=pending_id, event=event, entries=tuple(entries))
        return (await self.complete_many([done], inbox_limit))[0]

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
                item = InboxItem(
                    id=uuid.uuid4(),
                    user_id=entry.user_id,
                    account_id=event.account_id,
                    mower_id=event.mower_id,
                    kind=event.kind,
                    severity=event.severity,
                    dedupe_key=event.dedupe_key,
                    message_key=event.message_key,
                    params=dict(event.params),
                    occurred_at=event.occurred_at,
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
            self._queue_deliveries(done.event, [(i.user_id, i.held_by_quiet_hours) for i in mine])
        return kept

    async def discard_pending(self, pending_id: int) -> bool:
        """Drop a pending event."""
        return self.pending.pop(pending_id, None) is not None

    # -- preferences -----------------------------------------------------------------

    async def get_preferences(self, user_id: str) -> Preferences | None:
        """The user's saved preferences."""
        row = self.preferences.get(user_id)
        return None if row is None else row[1]

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

    # -- inbox -----------------------------------------------------------------------

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

    # -- removal ---------------------------------------------------------------------

    async def delete_user(self, user_id: str) -> int:
        """Delete the user's preferences, inbox, targets and deliveries."""
        deleted = self._forget_deliveries(user_id=user_id)
        deleted += 1 if self.preferences.pop(user_id, None) is not None else 0
        for item in self._items_of(user_id):
            del self.inbox[item.id]
            deleted += 1
        return deleted

    async def forget_mower(self, mower_id: uuid.UUID) -> int:
        """Delete everything about the mower and drop it from selections."""
        deleted = self._forget_deliveries(mower_id=mower_id)
        deleted += 1 if self.watch_rows.pop(mower_id, None) is not None else 0
        self.versions.pop(mower_id, None)
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


class _WatchTransaction:
    def __init__(self, store: InMemoryNotificationStore) -> None:
        self._store = store
        self._locked: set[uuid.UUID] = set()
        self._claimed: set[uuid.UUID] = set()
        self._writes: list[WatchWrite | MowerWatch] = []
        self._events: list[RuleEvent] = []

    async def lock(self, mower_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, MowerWatch]:
        self._locked.update(mower_ids)
        return await self._store.read_watches(sorted(mower_ids, key=lambda m: m.int))

    async def lock_versions(self, mower_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Stamp]:
        self._locked.update(mower_ids)
        watches = await self._store.read_watches(mower_ids)
        versions = self._store.versions
        return {m: Stamp(versions.get(m, 0), w.observed_at) for m, w in watches.items()}

    async def claim_due(self, now: datetime, limit: int) -> list[MowerWatch]:
        due = [
            (at, mower_id)
            for mower_id, (_, at) in self._store.watch_rows.items()
            if at is not None and at <= now and mower_id not in self._claimed
        ]
        due.sort(key=lambda pair: (pair[0], pair[1].int))
        taken = [mower_id for _, mower_id in due[:limit]]
        self._claimed.update(taken)
        return [self._store.watch_rows[m][0] for m in taken]

    async def write(self, watches: Sequence[WatchWrite], events: Sequence[RuleEvent]) -> None:
        for write in watches:
            mower_id = write.watch.mower_id
            if mower_id not in self._locked and mower_id not in self._claimed:
                raise ValueError(f"watch of {mower_id} written without locking it")
        self._writes.extend(watches)  # applied in order: the last write of a mower wins
        self._events.extend(events)

    async def touch(self, watches: Sequence[MowerWatch]) -> None:
        for watch in watches:
            if watch.mower_id not in self._locked or watch.mower_id not in self._store.watch_rows:
                raise ValueError(f"watch of {watch.mower_id} touched without locking it")
        self._writes.extend(watches)

    def commit(self) -> None:
        rows, versions = self._store.watch_rows, self._store.versions
        bumped: set[uuid.UUID] = set()
        for write in self._writes:
            if isinstance(write, MowerWatch):
                stored, due = rows[write.mower_id]
                rows[write.mower_id] = (_contact(stored, write), due)
                continue
            mower_id = write.watch.mower_id
            due = write.silence_due_at
            if mower_id not in self._claimed and mower_id in rows:
                due = _earlier(rows[mower_id][1], due)
            if not write.changed:
                rows[mower_id] = (rows[mower_id][0], due)
                continue
            if mower_id not in bumped:  # PostgreSQL: one version per statement and row
                bumped.add(mower_id)
                versions[mower_id] = versions.get(mower_id, -1) + 1
            watch = write.watch
            if mower_id in rows:
                watch = _contact(watch, rows[mower_id][0])
            rows[mower_id] = (watch, due)
        self._store.add_pending(self._events)


def _contact(watch: MowerWatch, other: MowerWatch) -> MowerWatch:
    """``watch`` with the newer of each contact time (they never go back)."""
    observed = max(watch.observed_at, other.observed_at)
    contact = max(watch.contact_at, other.contact_at)
    if observed == watch.observed_at and contact == watch.contact_at:
        return watch
    return _replace(watch, observed_at=observed, contact_at=contact)
