"""The watch store in PostgreSQL: batched ``unnest`` writes, sorted row locks, SKIP LOCKED.

A transaction's events are written by the writer of pending events it is given (the
inbox's, ``PostgresInbox.insert_pending``), on the transaction's connection: the watches
and the events decided on them commit together (``ports.py`` says why).
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime

import asyncpg
import msgspec

from contracts.v1.events import AlarmChangeKind
from mowdeck.kit.pg import rows_affected
from mowdeck.notifications.alarms.feed import Written
from mowdeck.notifications.alarms.model import Alarm
from mowdeck.notifications.errors import StoreConflictError
from mowdeck.notifications.ingest import sql
from mowdeck.notifications.ingest.model import Stamp, WatchWrite
from mowdeck.notifications.ingest.ports import WatchStore
from mowdeck.notifications.pg import delete_rows, translated
from mowdeck.notifications.rules.events import AlarmChange, RuleEvent
from mowdeck.notifications.rules.watch import MowerWatch, decode_watch

__all__ = ["PendingWriter", "PostgresWatches"]

PendingWriter = Callable[[asyncpg.Connection, Sequence[RuleEvent]], Awaitable[object]]
"""Writes pending events on a connection, inside the transaction that holds it."""
AlarmWriter = Callable[[asyncpg.Connection, Sequence[AlarmChange]], Awaitable[Written]]
"""Writes alarm changes on a connection, inside the transaction that holds it; returns
the alarms as they are after."""


async def _no_alarms(_conn: asyncpg.Connection, _changes: Sequence[AlarmChange]) -> Written:
    return []


def _nobody(_written: Written) -> None:
    return None


_uuid_int = operator.attrgetter("int")
_replace = msgspec.structs.replace


def _watch(row: asyncpg.Record) -> MowerWatch:
    """The watch of a ``sql._WATCH`` row: its document with the contact columns put in."""
    watch = decode_watch(row[1])
    if watch.observed_at == row[2] and watch.contact_at == row[3]:
        return watch
    return _replace(watch, observed_at=row[2], contact_at=row[3])


class PostgresWatches(WatchStore):
    """``notification_watches`` through an asyncpg pool; events go to ``pending``."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        *,
        pending: PendingWriter,
        alarms: AlarmWriter = _no_alarms,
        written: Callable[[Written], object] = _nobody,
    ) -> None:
        self._pool = pool
        self._pending = pending
        self._alarms = alarms
        self._written = written

    @asynccontextmanager
    async def watches(self) -> AsyncIterator[_WatchTransaction]:
        """One transaction for a batch of states, link events or a scan round."""
        with translated("watch transaction"):
            async with self._pool.acquire() as conn:
                async with conn.transaction():
                    tx = _WatchTransaction(conn, self._pending, self._alarms)
                    yield tx
                if tx.written:  # committed: told only now
                    self._written(tx.written)

    async def read_watches(self, mower_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, MowerWatch]:
        """The stored watches of ``mower_ids``."""
        with translated("watch read"):
            rows = await self._pool.fetch(sql.READ_WATCHES, list(mower_ids))
        return {row[0]: _watch(row) for row in rows}

    async def delete_user_rows(self, _conn: asyncpg.Connection, _user_id: str, /) -> int:
        """Nothing: watches belong to mowers (an ``inbox.erasure`` part)."""
        return 0

    async def delete_mower_rows(self, conn: asyncpg.Connection, mower_id: uuid.UUID, /) -> int:
        """Delete the mower's watch on ``conn`` (an ``inbox.erasure`` part)."""
        return await delete_rows(conn, sql.FORGET_MOWER, mower_id)


class _WatchTransaction:
    def __init__(
        self, conn: asyncpg.Connection, pending: PendingWriter, alarms: AlarmWriter
    ) -> None:
        self._conn = conn
        self._pending = pending
        self._alarms = alarms
        self.written: list[tuple[Alarm, AlarmChangeKind]] = []  # after the commit
        # Mowers whose row this transaction holds, and those it may create.
        self._held: set[uuid.UUID] = set()
        self._claimed: set[uuid.UUID] = set()
        self._lockable: set[uuid.UUID] = set()

    async def lock(self, mower_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, MowerWatch]:
        # Sorted by the ints, the order of PostgreSQL's uuid comparison.
        ids = sorted(set(mower_ids), key=_uuid_int)
        rows = await self._conn.fetch(sql.LOCK_WATCHES, ids)
        self._lockable.update(ids)
        watches = {row[0]: _watch(row) for row in rows}
        self._held.update(watches)
        return watches

    async def lock_versions(self, mower_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Stamp]:
        ids = sorted(set(mower_ids), key=_uuid_int)
        rows = await self._conn.fetch(sql.LOCK_VERSIONS, ids)
        self._lockable.update(ids)
        stamps = {row[0]: Stamp(row[1], row[2]) for row in rows}
        self._held.update(stamps)
        return stamps

    async def claim_due(self, now: datetime, limit: int) -> list[MowerWatch]:
        rows = await self._conn.fetch(sql.CLAIM_DUE, now, limit)
        watches = [_watch(row) for row in rows]
        self._claimed.update(row[0] for row in rows)
        self._held.update(row[0] for row in rows)
        return watches

    async def touch(self, watches: Sequence[MowerWatch]) -> None:
        for watch in watches:
            if watch.mower_id not in self._held:
                raise ValueError(f"watch of {watch.mower_id} touched without locking it")
        if watches:
            await self._conn.execute(sql.TOUCH_WATCHES, *sql.touch_columns(watches))

    async def write(
        self,
        watches: Sequence[WatchWrite],
        events: Sequence[RuleEvent],
        alarms: Sequence[AlarmChange] = (),
    ) -> None:
        update: list[WatchWrite] = []
        insert: list[WatchWrite] = []
        # The last write of a mower wins: ``unnest`` keys must be distinct per statement.
        for w in {w.watch.mower_id: w for w in watches}.values():
            mower_id = w.watch.mower_id
            if mower_id in self._held:
                update.append(w)
            elif mower_id in self._lockable:
                insert.append(w)
            else:
                raise ValueError(f"watch of {mower_id} written without locking it")
        conn = self._conn
        if update:
            exact = [w.watch.mower_id in self._claimed for w in update]
            changed = [w.changed for w in update]
            await conn.execute(sql.UPDATE_WATCHES, *sql.watch_columns(update), changed, exact)
        if insert:
            status = await conn.execute(sql.INSERT_WATCHES, *sql.watch_columns(insert))
            if rows_affected(status) != len(insert):
                raise StoreConflictError(
                    "a watch was created by another transaction meanwhile; plan the batch again"
                )
            self._held.update(w.watch.mower_id for w in insert)
        if events:
            await self._pending(conn, events)
        if alarms:
            self.written += await self._alarms(conn, alarms)
