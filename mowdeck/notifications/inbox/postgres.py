"""The PostgreSQL store: batched ``unnest`` writes, sorted row locks, SKIP LOCKED claims.

The pool is the composition's (its sessions may run in any time zone: every time column
is ``timestamptz`` and comes back in UTC).
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import msgspec

from mowdeck.kit.pg import keep_session, rows_affected, session_settings
from mowdeck.notifications.delivery import sql as delivery_sql
from mowdeck.notifications.delivery.postgres import PostgresDeliveries
from mowdeck.notifications.errors import StoreConflictError, StoreError, StoreRejectedError
from mowdeck.notifications.inbox import sql
from mowdeck.notifications.inbox.completion import complete
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
from mowdeck.notifications.rules.events import Param, RuleEvent
from mowdeck.notifications.rules.quiet import QuietHours
from mowdeck.notifications.rules.watch import MowerWatch, decode_watch

__all__ = ["PostgresNotificationStore", "pool_options"]

# The SQLSTATE class of data exceptions: the values themselves were refused.
_DATA_EXCEPTION = "22"
# deadlock_detected, serialization_failure: rolled back for another transaction's sake.
_CONFLICTS = frozenset({"40P01", "40001"})
_encode = msgspec.json.Encoder().encode
_params = msgspec.json.Decoder(dict[str, Param])
_kinds = msgspec.json.Decoder(dict[str, bool])
_uuid_int = operator.attrgetter("int")
_replace = msgspec.structs.replace


@contextmanager
def _translated(operation: str) -> Iterator[None]:
    """asyncpg's errors as ``StoreRejectedError``, ``StoreConflictError`` or ``StoreError``."""
    try:
        yield
    except (asyncpg.PostgresError, asyncpg.InterfaceError) as err:
        sqlstate = getattr(err, "sqlstate", None) or ""
        if isinstance(err, asyncpg.DataError) or sqlstate.startswith(_DATA_EXCEPTION):
            raise StoreRejectedError(f"{operation} refused: {err}") from err
        if sqlstate in _CONFLICTS:
            raise StoreConflictError(f"{operation} lost a race: {err}") from err
        raise StoreError(f"{operation} failed: {err}") from err


def _watch(row: asyncpg.Record) -> MowerWatch:
    """The watch of a ``sql._WATCH`` row: its document with the contact columns put in."""
    watch = decode_watch(row[1])
    if watch.observed_at == row[2] and watch.contact_at == row[3]:
        return watch
    return _replace(watch, observed_at=row[2], contact_at=row[3])


def _event(row: asyncpg.Record) -> RuleEvent:
    return RuleEvent(
        kind=row["kind"],
        mower_id=row["mower_id"],
        account_id=row["account_id"],
        severity=row["severity"],
        dedupe_key=row["dedupe_key"],
        message_key=row["message_key"],
        params=_params.decode(row["params"]),
        occurred_at=row["occurred_at"],
    )


def _item(row: asyncpg.Record) -> InboxItem:
    return InboxItem(
        id=row["id"],
        user_id=row["user_id"],
        account_id=row["account_id"],
        mower_id=row["mower_id"],
        kind=row["kind"],
        severity=row["severity"],
        dedupe_key=row["dedupe_key"],
        message_key=row["message_key"],
        params=_params.decode(row["params"]),
        occurred_at=row["occurred_at"],
        read=row["read"],
        held_by_quiet_hours=row["held_by_quiet_hours"],
    )


def _preferences(row: asyncpg.Record) -> Preferences:
    quiet = None
    if row["quiet_start"] is not None:
        quiet = QuietHours(
            start=row["quiet_start"],
            end=row["quiet_end"],
            allow_critical=row["quiet_allow_critical"],
        )
    return Preferences(
        locale=row["locale"],
        timezone=row["timezone"],
        scope=row["scope"],
        mowers=list(row["mowers"]),
        kinds=_kinds.decode(row["kinds"]),
        quiet_hours=quiet,
    )


def _subscriber(row: asyncpg.Record) -> Subscriber:
    return Subscriber(
        user_id=row["user_id"], account_id=row["account_id"], preferences=_preferences(row)
    )


def pool_options(max_size: int, *, statement_timeout_ms: int) -> dict[str, Any]:
    """Options of Notifications' pool (``asyncpg.create_pool``): sessions in UTC, released
    without asyncpg's reset query (``kit.pg.keep_session``: nothing on this pool changes
    session state; the offline scan and the delivery workers lock rows with ``SKIP LOCKED`` inside
    their transactions, housekeeping locks on a connection of its own)."""
    return {
        "min_size": 1,
        "max_size": max_size,
        "server_settings": session_settings(statement_timeout_ms),
        "reset": keep_session,
    }


class PostgresNotificationStore(PostgresDeliveries):
    """Notification tables in PostgreSQL through an asyncpg pool; the pruning round's
    statements get ``maintenance_timeout_ms`` (None: the pool's)."""

    def __init__(self, pool: asyncpg.Pool, *, maintenance_timeout_ms: int | None = None) -> None:
        self._pool = pool
        self._maintenance_timeout_ms = maintenance_timeout_ms

    # -- watches ---------------------------------------------------------------------

    @asynccontextmanager
    async def watches(self) -> AsyncIterator[_WatchTransaction]:
        """One transaction for a batch of states, link events or a scan round."""
        with _translated("watch transaction"):
            async with self._pool.acquire() as conn, conn.transaction():
                yield _WatchTransaction(conn)

    async def read_watches(self, mower_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, MowerWatch]:
        """The stored watches of ``mower_ids``."""
        with _translated("watch read"):
            rows = await self._pool.fetch(sql.READ_WATCHES, list(mower_ids))
        return {row[0]: _watch(row) for row in rows}

    # -- fan-out ---------------------------------------------------------------------

    async def claim_pending(
        self, now: datetime, limit: int, lease: timedelta
    ) -> list[PendingEvent]:
        """Claim pending events in a short transaction of its own."""
        with _translated("pending claim"):
            rows = await self._pool.fetch(sql.CLAIM_PENDING, now, limit, lease)
        claimed = [PendingEvent(id=r["id"], event=_event(r), attempts=r["attempts"]) for r in rows]
        return sorted(claimed, key=operator.attrgetter("id"))

    async def complete_pending(
        self,
        pending_id: int,
        event: RuleEvent,
        entries: Sequence[InboxEntry],
        inbox_limit: int,
    ) -> list[InboxItem]:
        """Write the inbox items, drop the pending event and trim, in one transaction."""
        done = Completion(pending_id=pending_id, event=event, entries=tuple(entries))
        return (await self.complete_many([done], inbox_limit))[0]

    async def complete_many(
        self, completions: Sequence[Completion], inbox_limit: int
    ) -> list[list[InboxItem]]:
        """``complete_pending`` for several events in one transaction."""
        if not completions:
            return []
        with _translated("pending completion"):
            async with self._pool.acquire() as conn, conn.transaction():
                return await complete(conn, completions, inbox_limit)

    async def discard_pending(self, pending_id: int) -> bool:
        """Drop a pending event."""
        with _translated("pending discard"):
            status = await self._pool.execute(sql.DELETE_PENDING, pending_id)
        return rows_affected(status) == 1

    # -- preferences -----------------------------------------------------------------

    async def get_preferences(self, user_id: str) -> Preferences | None:
        """The user's saved preferences."""
        with _translated("preferences read"):
            row = await self._pool.fetchrow(sql.GET_PREFERENCES, user_id)
        return None if row is None else _preferences(row)

    async def put_preferences(
        self, user_id: str, account_id: uuid.UUID, preferences: Preferences
    ) -> None:
        """Save the user's preferences."""
        quiet = preferences.quiet_hours
        with _translated("preferences write"):
            await self._pool.execute(
                sql.PUT_PREFERENCES,
                user_id,
                account_id,
                preferences.scope,
                list(preferences.mowers),
                _encode(preferences.kinds).decode(),
                preferences.locale,
                preferences.timezone,
                None if quiet is None else quiet.start,
                None if quiet is None else quiet.end,
                True if quiet is None else quiet.allow_critical,
            )

    async def subscribers(self, account_id: uuid.UUID) -> list[Subscriber]:
        """The account's users with a scope."""
        with _translated("subscribers read"):
            rows = await self._pool.fetch(sql.SUBSCRIBERS, account_id)
        return [_subscriber(r) for r in rows]

    async def subscribers_of(
        self, account_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, list[Subscriber]]:
        """``subscribers`` of several accounts in one query."""
        found: dict[uuid.UUID, list[Subscriber]] = {a: [] for a in account_ids}
        with _translated("subscribers read"):
            rows = await self._pool.fetch(sql.SUBSCRIBERS_OF, list(found))
        for r in rows:
            found[r["account_id"]].append(_subscriber(r))
        return found

    # -- inbox -----------------------------------------------------------------------

    async def inbox_page(
        self, user_id: str, limit: int, cursor: InboxCursor | None = None
    ) -> InboxPage:
        """The user's items newest first behind ``cursor`` (one row more tells if more)."""
        with _translated("inbox read"):
            if cursor is None:
                rows = await self._pool.fetch(sql.INBOX_FIRST, user_id, limit + 1)
            else:
                rows = await self._pool.fetch(
                    sql.INBOX_AFTER, user_id, limit + 1, cursor.occurred_at, cursor.id
                )
        items = [_item(row) for row in rows[:limit]]
        more = len(rows) > limit and items
        return InboxPage(items, InboxCursor.after(items[-1]) if more else None)

    async def unread_count(self, user_id: str) -> int:
        """The user's unread items."""
        with _translated("inbox count"):
            count: int = await self._pool.fetchval(sql.UNREAD, user_id)
        return count

    async def mark_read(self, user_id: str, ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        """Mark the user's items among ``ids`` read."""
        if not ids:
            return set()
        with _translated("inbox mark read"):
            rows = await self._pool.fetch(sql.MARK_READ, user_id, list(ids))
        return {row["id"] for row in rows}

    # -- removal ---------------------------------------------------------------------

    async def delete_user(self, user_id: str) -> int:
        """Delete the user's preferences, inbox, targets and deliveries in one transaction."""
        deleted = 0
        with _translated("user deletion"):
            async with self._pool.acquire() as conn, conn.transaction():
                for statement in (*delivery_sql.DELETE_USER, *sql.DELETE_USER):
                    deleted += rows_affected(await conn.execute(statement, user_id))
        return deleted

    async def forget_mower(self, mower_id: uuid.UUID) -> int:
        """Delete everything about the mower and drop it from selections."""
        deleted = 0
        with _translated("mower removal"):
            async with self._pool.acquire() as conn, conn.transaction():
                for statement in (*delivery_sql.FORGET_MOWER, *sql.FORGET_MOWER):
                    deleted += rows_affected(await conn.execute(statement, mower_id))
                await conn.execute(sql.UNSELECT_MOWER, mower_id)
        return deleted


class _WatchTransaction:
    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn
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

    async def write(self, watches: Sequence[WatchWrite], events: Sequence[RuleEvent]) -> None:
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
            await conn.execute(sql.INSERT_PENDING, *sql.event_columns(events))
