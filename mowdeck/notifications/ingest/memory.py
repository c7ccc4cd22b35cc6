"""The in-memory watch store: the same contract as PostgreSQL, for unit tests.

A watch transaction holds one lock over every watch (so claims never meet a held row)
and applies its writes when it commits; an exception inside it leaves nothing behind.
Its events go to the writer of pending events it is given, at the commit (the inbox's,
``InMemoryInbox.add_pending``), as PostgreSQL writes them in the same transaction.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime

import msgspec

from mowdeck.notifications.alarms.feed import Written
from mowdeck.notifications.ingest.model import Stamp, WatchWrite
from mowdeck.notifications.ingest.ports import WatchStore
from mowdeck.notifications.rules.events import AlarmChange, RuleEvent
from mowdeck.notifications.rules.watch import MowerWatch

__all__ = ["InMemoryWatches"]

_replace = msgspec.structs.replace


def _earlier(stored: datetime | None, new: datetime | None) -> datetime | None:
    # PostgreSQL's least(): NULL only when both are.
    if stored is None or new is None:
        return new if stored is None else stored
    return min(stored, new)


class InMemoryWatches(WatchStore):
    """Watches as a dict; events committed with them go to ``pending``."""

    def __init__(
        self,
        *,
        pending: Callable[[Sequence[RuleEvent]], object],
        alarms: Callable[[Sequence[AlarmChange]], Written] = lambda _changes: [],
        written: Callable[[Written], object] = lambda _written: None,
    ) -> None:
        self._pending = pending
        self._alarms = alarms
        self._written = written
        self._lock = asyncio.Lock()
        self.watch_rows: dict[uuid.UUID, tuple[MowerWatch, datetime | None]] = {}
        self.versions: dict[uuid.UUID, int] = {}

    @asynccontextmanager
    async def watches(self) -> AsyncIterator[_WatchTransaction]:
        """A watch transaction; its writes are applied on a clean exit."""
        async with self._lock:
            tx = _WatchTransaction(self)
            yield tx
            self._pending(tx.commit())
            written = self._alarms(tx.alarms)
        if written:  # committed: told only now, the lock let go
            self._written(written)

    async def read_watches(self, mower_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, MowerWatch]:
        """The stored watches of ``mower_ids``."""
        return {m: self.watch_rows[m][0] for m in mower_ids if m in self.watch_rows}

    def delete_user_rows(self, _user_id: str, /) -> int:
        """Nothing: watches belong to mowers (an ``inbox.erasure`` part)."""
        return 0

    def delete_mower_rows(self, mower_id: uuid.UUID, /) -> int:
        """Delete the mower's watch (an ``inbox.erasure`` part)."""
        self.versions.pop(mower_id, None)
        return 1 if self.watch_rows.pop(mower_id, None) is not None else 0


class _WatchTransaction:
    def __init__(self, store: InMemoryWatches) -> None:
        self._store = store
        self._locked: set[uuid.UUID] = set()
        self._claimed: set[uuid.UUID] = set()
        self._writes: list[WatchWrite | MowerWatch] = []
        self._events: list[RuleEvent] = []
        self.alarms: list[AlarmChange] = []

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

    async def write(
        self,
        watches: Sequence[WatchWrite],
        events: Sequence[RuleEvent],
        alarms: Sequence[AlarmChange] = (),
    ) -> None:
        for write in watches:
            mower_id = write.watch.mower_id
            if mower_id not in self._locked and mower_id not in self._claimed:
                raise ValueError(f"watch of {mower_id} written without locking it")
        self._writes.extend(watches)  # applied in order: the last write of a mower wins
        self._events.extend(events)
        self.alarms.extend(alarms)

    async def touch(self, watches: Sequence[MowerWatch]) -> None:
        for watch in watches:
            if watch.mower_id not in self._locked or watch.mower_id not in self._store.watch_rows:
                raise ValueError(f"watch of {watch.mower_id} touched without locking it")
        self._writes.extend(watches)

    def commit(self) -> list[RuleEvent]:
        """Apply the writes; the events to hand on."""
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
        return self._events


def _contact(watch: MowerWatch, other: MowerWatch) -> MowerWatch:
    """``watch`` with the newer of each contact time (they never go back)."""
    observed = max(watch.observed_at, other.observed_at)
    contact = max(watch.contact_at, other.contact_at)
    if observed == watch.observed_at and contact == watch.contact_at:
        return watch
    return _replace(watch, observed_at=observed, contact_at=contact)
