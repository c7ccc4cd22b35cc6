"""The inbox in PostgreSQL: pending events, inbox items and preferences through a pool.

``complete_many`` writes the inbox items and, on the same connection in the same
transaction, the delivery rows of the new items through the queue it is given (the
delivery part's ``queue_deliveries``): ADR 0022's one transaction (``ports.py``).
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

import asyncpg
import msgspec

from mowdeck.kit.pg import rows_affected
from mowdeck.notifications.inbox import sql
from mowdeck.notifications.inbox.completion import DeliveryQueue, complete
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
from mowdeck.notifications.pg import (
    columns,
    delete_rows,
    message_fields,
    quiet_hours,
    translated,
)
from mowdeck.notifications.rules.events import RuleEvent

__all__ = ["PostgresInbox"]

_encode = msgspec.json.Encoder().encode
_kinds = msgspec.json.Decoder(dict[str, bool])


_ITEM = ("id", "user_id", "account_id", "read", "held_by_quiet_hours")


def _event(row: asyncpg.Record) -> RuleEvent:
    return RuleEvent(account_id=row["account_id"], **message_fields(row))


def _item(row: asyncpg.Record) -> InboxItem:
    return InboxItem(**columns(row, *_ITEM), **message_fields(row))


def _preferences(row: asyncpg.Record) -> Preferences:
    return Preferences(
        mowers=list(row["mowers"]),
        kinds=_kinds.decode(row["kinds"]),
        quiet_hours=quiet_hours(row),
        **columns(row, "locale", "timezone", "scope"),
    )


def _subscriber(row: asyncpg.Record) -> Subscriber:
    return Subscriber(
        user_id=row["user_id"], account_id=row["account_id"], preferences=_preferences(row)
    )


class PostgresInbox(PendingStore, InboxStore, PreferencesStore):
    """``PendingStore``, ``InboxStore`` and ``PreferencesStore`` on ``pool``."""

    def __init__(self, pool: asyncpg.Pool, *, deliveries: DeliveryQueue) -> None:
        self._pool = pool
        self._deliveries = deliveries

    # -- pending events --------------------------------------------------------------

    async def insert_pending(self, conn: asyncpg.Connection, events: Sequence[RuleEvent]) -> None:
        """Write pending events on ``conn``, in the watch transaction that decided them."""
        await conn.execute(sql.INSERT_PENDING, *sql.event_columns(events))

    async def claim_pending(
        self, now: datetime, limit: int, lease: timedelta
    ) -> list[PendingEvent]:
        """Claim pending events in a short transaction of its own."""
        with translated("pending claim"):
            rows = await self._pool.fetch(sql.CLAIM_PENDING, now, limit, lease)
        claimed = [PendingEvent(id=r["id"], event=_event(r), attempts=r["attempts"]) for r in rows]
        return sorted(claimed, key=operator.attrgetter("id"))

    async def complete_many(
        self, completions: Sequence[Completion], inbox_limit: int
    ) -> list[list[InboxItem]]:
        """``complete_pending`` for several events in one transaction."""
        if not completions:
            return []
        with translated("pending completion"):
            async with self._pool.acquire() as conn, conn.transaction():
                return await complete(conn, completions, inbox_limit, self._deliveries)

    async def discard_pending(self, pending_id: int) -> bool:
        """Drop a pending event."""
        with translated("pending discard"):
            status = await self._pool.execute(sql.DELETE_PENDING, pending_id)
        return rows_affected(status) == 1

    # -- preferences -----------------------------------------------------------------

    async def get_preferences(self, user_id: str) -> Preferences | None:
        """The user's saved preferences."""
        with translated("preferences read"):
            row = await self._pool.fetchrow(sql.GET_PREFERENCES, user_id)
        return None if row is None else _preferences(row)

    async def put_preferences(
        self, user_id: str, account_id: uuid.UUID, preferences: Preferences
    ) -> None:
        """Save the user's preferences."""
        quiet = preferences.quiet_hours
        with translated("preferences write"):
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
        with translated("subscribers read"):
            rows = await self._pool.fetch(sql.SUBSCRIBERS, account_id)
        return [_subscriber(r) for r in rows]

    async def subscribers_of(
        self, account_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, list[Subscriber]]:
        """``subscribers`` of several accounts in one query."""
        found: dict[uuid.UUID, list[Subscriber]] = {a: [] for a in account_ids}
        with translated("subscribers read"):
            rows = await self._pool.fetch(sql.SUBSCRIBERS_OF, list(found))
        for r in rows:
            found[r["account_id"]].append(_subscriber(r))
        return found

    # -- the inbox -------------------------------------------------------------------

    async def inbox_page(
        self, user_id: str, limit: int, cursor: InboxCursor | None = None
    ) -> InboxPage:
        """The user's items newest first behind ``cursor`` (one row more tells if more)."""
        with translated("inbox read"):
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
        with translated("inbox count"):
            count: int = await self._pool.fetchval(sql.UNREAD, user_id)
        return count

    async def mark_read(self, user_id: str, ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        """Mark the user's items among ``ids`` read."""
        if not ids:
            return set()
        with translated("inbox mark read"):
            rows = await self._pool.fetch(sql.MARK_READ, user_id, list(ids))
        return {row["id"] for row in rows}

    # -- erasure (``erasure.py``) ----------------------------------------------------

    async def delete_user_rows(self, conn: asyncpg.Connection, user_id: str, /) -> int:
        """Delete the user's preferences and inbox on ``conn``."""
        return await delete_rows(conn, sql.DELETE_USER, user_id)

    async def delete_mower_rows(self, conn: asyncpg.Connection, mower_id: uuid.UUID, /) -> int:
        """Delete the mower's pending events and inbox items on ``conn``, and drop it from
        every selection (not counted)."""
        deleted = await delete_rows(conn, sql.FORGET_MOWER, mower_id)
        await conn.execute(sql.UNSELECT_MOWER, mower_id)
        return deleted
