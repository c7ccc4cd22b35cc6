"""The fan-out's write in PostgreSQL: several pending events to the inbox in one transaction."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence

import asyncpg
import msgspec

from mowdeck.notifications.inbox import sql
from mowdeck.notifications.inbox.model import Completion, InboxItem
from mowdeck.notifications.rules.events import RuleEvent

__all__ = ["DeliveryQueue", "complete"]

DeliveryQueue = Callable[
    [asyncpg.Connection, Sequence[tuple[RuleEvent, str, bool]]], Awaitable[object]
]
"""Queues the deliveries of new inbox items ``(event, user_id, held by quiet hours)`` on a
connection, inside the transaction that wrote them (the delivery part's
``queue_deliveries``)."""

_encode = msgspec.json.Encoder().encode


def _item(row: asyncpg.Record, event: RuleEvent) -> InboxItem:
    return InboxItem.of(
        event, row["id"], row["user_id"], held_by_quiet_hours=row["held_by_quiet_hours"]
    )


async def _insert(
    conn: asyncpg.Connection, completions: Sequence[Completion]
) -> list[asyncpg.Record]:
    columns: list[list[object]] = [[] for _ in range(11)]
    for n, done in enumerate(completions):
        e = done.event
        params = _encode(e.params).decode()
        for entry in done.entries:
            row = (
                n,
                entry.user_id,
                entry.held_by_quiet_hours,
                e.account_id,
                e.mower_id,
                e.kind,
                e.severity,
                e.dedupe_key,
                e.message_key,
                params,
                e.occurred_at,
            )
            for column, value in zip(columns, row, strict=True):
                column.append(value)
    if not columns[0]:
        return []
    rows: list[asyncpg.Record] = await conn.fetch(sql.INSERT_INBOX_MANY, *columns)
    return rows


async def complete(
    conn: asyncpg.Connection,
    completions: Sequence[Completion],
    inbox_limit: int,
    queue_deliveries: DeliveryQueue,
) -> list[list[InboxItem]]:
    """Inbox items, pending rows gone, inbox trimmed, deliveries queued (``queue_deliveries``):
    four statements (five with held items) in the caller's transaction, whatever the number
    of events."""
    inserted = await _insert(conn, completions)
    await conn.execute(sql.DELETE_PENDINGS, [c.pending_id for c in completions])
    trimmed: set[uuid.UUID] = set()
    if inserted:
        users = sorted({row["user_id"] for row in inserted})
        trimmed = {row["id"] for row in await conn.fetch(sql.TRIM_INBOX, users, inbox_limit)}
    # A new row belongs to the first event of the batch with its user and dedupe key.
    owner: dict[tuple[str, str], int] = {}
    for n, done in enumerate(completions):
        for entry in done.entries:
            owner.setdefault((entry.user_id, done.event.dedupe_key), n)
    items: list[list[InboxItem]] = [[] for _ in completions]
    for row in inserted:
        if row["id"] not in trimmed:
            n = owner[(row["user_id"], row["dedupe_key"])]
            items[n].append(_item(row, completions[n].event))
    kept = [
        (completions[n].event, item.user_id, item.held_by_quiet_hours)
        for n, mine in enumerate(items)
        for item in mine
    ]
    await queue_deliveries(conn, kept)
    return items
