"""The alarm store in PostgreSQL (``sql/notifications/0004_alarms.sql``)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

import asyncpg
import msgspec

from mowdeck.kit.pg import rows_affected
from mowdeck.notifications.alarms import sql
from mowdeck.notifications.alarms.audit import AuditQuery, AuditRecord
from mowdeck.notifications.alarms.escalation import escalation_event
from mowdeck.notifications.alarms.model import Alarm, AlarmCursor, AlarmPage, AlarmQuery
from mowdeck.notifications.alarms.ports import AlarmStore
from mowdeck.notifications.pg import delete_rows, translated
from mowdeck.notifications.rules.events import AlarmChange, AlarmChangeKind, RuleEvent

__all__ = ["PostgresAlarms", "write_changes"]

_FIELDS = tuple(f for f in Alarm.__struct_fields__)
_params = msgspec.json.Encoder()
_decode_params = msgspec.json.Decoder(dict[str, str | int | float])


def _alarm(row: asyncpg.Record) -> Alarm:
    values = {name: row[name] for name in _FIELDS}
    params = values["params"]
    values["params"] = _decode_params.decode(params) if isinstance(params, str | bytes) else params
    return Alarm(**values)


async def write_changes(
    conn: asyncpg.Connection, changes: Sequence[AlarmChange]
) -> list[tuple[Alarm, AlarmChangeKind]]:
    """Store the changes the watches decided, on ``conn`` (the watches' transaction holds
    it: ``ingest.postgres.PostgresWatches``); the alarms as they are after, each with what
    happened to it. Changes of distinct mowers and conditions, as a batch's are, take one
    statement for the raised and one for the cleared; a condition changed twice in one
    batch (cleared and raised again) goes in order."""
    if len({(c.mower_id, c.condition) for c in changes}) < len(changes):
        written: list[tuple[Alarm, AlarmChangeKind]] = []
        for c in changes:
            written += await _write_one(conn, c)
        await _audit(conn, written)
        return written
    raised = [c for c in changes if c.change != "cleared"]
    cleared = [c for c in changes if c.change == "cleared"]
    rows: list[asyncpg.Record] = []
    if cleared:
        rows += await conn.fetch(
            sql.CLEAR_MANY,
            [c.mower_id for c in cleared],
            [c.condition for c in cleared],
            [c.at for c in cleared],
        )
    if raised:
        rows += await conn.fetch(
            sql.RAISE_MANY,
            [uuid.uuid4() for _ in raised],
            [c.account_id for c in raised],
            [c.mower_id for c in raised],
            [c.condition for c in raised],
            [c.kind for c in raised],
            [c.severity for c in raised],
            [c.code for c in raised],
            [_params.encode(c.params).decode() for c in raised],
            [c.at for c in raised],
        )
    written = [(_alarm(r), _change(r)) for r in rows]
    await _audit(conn, written)
    return written


async def _audit(
    conn: asyncpg.Connection, written: Sequence[tuple[Alarm, AlarmChangeKind]]
) -> None:
    """The trail's lines of what the watches decided (``audit.py``), on their connection."""
    if not written:
        return
    at = [a.cleared_at if c == "cleared" and a.cleared_at else a.latest_at for a, c in written]
    nobody: list[str | None] = [None] * len(written)
    await conn.execute(
        sql.AUDIT_MANY,
        at,
        [a.account_id for a, _ in written],
        [a.mower_id for a, _ in written],
        [a.id for a, _ in written],
        [c for _, c in written],
        [a.kind for a, _ in written],
        [a.condition for a, _ in written],
        [a.severity for a, _ in written],
        [a.code for a, _ in written],
        nobody,
        nobody,
        nobody,
    )


def _change(row: asyncpg.Record) -> AlarmChangeKind:
    if row["state"] == "cleared":
        return "cleared"
    return "raised" if row["inserted"] else "updated"


async def _write_one(
    conn: asyncpg.Connection, c: AlarmChange
) -> list[tuple[Alarm, AlarmChangeKind]]:
    if c.change == "cleared":
        rows = await conn.fetch(sql.CLEAR, c.mower_id, c.condition, c.at)
    else:
        rows = await conn.fetch(
            sql.RAISE,
            uuid.uuid4(),
            c.account_id,
            c.mower_id,
            c.condition,
            c.kind,
            c.severity,
            c.code,
            _params.encode(c.params).decode(),
            c.at,
        )
    return [(_alarm(r), _change(r)) for r in rows]


PendingWriter = Callable[[asyncpg.Connection, Sequence[RuleEvent]], Awaitable[object]]


async def _no_pending(_conn: asyncpg.Connection, _events: Sequence[RuleEvent]) -> None:
    return None


class PostgresAlarms(AlarmStore):
    """``notification_alarms`` through an asyncpg pool; ``pending`` writes the events an
    escalation owes, in its transaction (the inbox's ``insert_pending``)."""

    def __init__(self, pool: asyncpg.Pool, pending: PendingWriter = _no_pending) -> None:
        self._pool = pool
        self._pending = pending

    async def list_alarms(self, query: AlarmQuery, after: AlarmCursor | None) -> AlarmPage:
        """A page of the account's alarms, newest first."""
        mowers = None if query.mowers is None else list(query.mowers)
        statement = sql.LIST
        if "cleared" not in query.states:
            statement = sql.LIST_OPEN
        elif query.states == {"cleared"}:
            statement = sql.LIST_CLEARED
        with translated("alarm listing"):
            rows = await self._pool.fetch(
                statement,
                query.account_id,
                sorted(query.states),
                mowers,
                query.severity,
                None if after is None else after.latest_at,
                None if after is None else after.id,
                query.limit + 1,
            )
        items = [_alarm(r) for r in rows[: query.limit]]
        more = len(rows) > query.limit
        return AlarmPage(items, AlarmCursor(items[-1].latest_at, items[-1].id) if more else None)

    async def get_alarm(self, account_id: uuid.UUID, alarm_id: uuid.UUID) -> Alarm | None:
        """The alarm, if it is the account's."""
        with translated("alarm read"):
            row = await self._pool.fetchrow(sql.GET, account_id, alarm_id)
        return None if row is None else _alarm(row)

    async def acknowledge(
        self, alarm: Alarm, user_id: str, comment: str | None, at: datetime
    ) -> Alarm:
        """Acknowledge ``alarm`` (the first acknowledgement stays)."""
        with translated("alarm acknowledgement"):
            row = await self._pool.fetchrow(sql.ACKNOWLEDGE, alarm.id, user_id, at, comment)
        return alarm if row is None else _alarm(row)

    async def assign(self, alarm: Alarm, assignee: str | None, by: str, at: datetime) -> Alarm:
        """Assign ``alarm`` to ``assignee``."""
        with translated("alarm assignment"):
            row = await self._pool.fetchrow(sql.ASSIGN, alarm.id, assignee, by, at)
        return alarm if row is None else _alarm(row)

    async def audit_page(self, query: AuditQuery) -> list[AuditRecord]:
        """One page of the account's trail, newest first."""
        with translated("alarm audit"):
            rows = await self._pool.fetch(
                sql.AUDIT_PAGE,
                query.account_id,
                query.mower_id,
                query.change,
                query.since,
                query.until,
                query.before,
                query.limit,
            )
        return [AuditRecord(**dict(r)) for r in rows]

    async def prune_audit(self, before: datetime) -> int:
        """Delete the trail's lines older than ``before`` (its retention)."""
        with translated("alarm audit pruning"):
            async with self._pool.acquire() as conn, conn.transaction():
                await conn.execute(sql.PRUNE_AUDIT[0])
                return rows_affected(await conn.execute(sql.PRUNE_AUDIT[1], before))

    async def escalate(self, before: datetime, at: datetime, limit: int) -> list[Alarm]:
        """Escalate active critical alarms raised before ``before`` (each once)."""
        with translated("alarm escalation"):
            async with self._pool.acquire() as conn, conn.transaction():
                alarms = [_alarm(r) for r in await conn.fetch(sql.ESCALATE, before, at, limit)]
                if alarms:
                    await self._pending(conn, [escalation_event(a, at) for a in alarms])
        return alarms

    async def open_counts(self) -> dict[tuple[str, str], int]:
        """Open alarms by kind and severity."""
        with translated("alarm counts"):
            rows = await self._pool.fetch(sql.OPEN_COUNTS)
        return {(r[0], r[1]): r[2] for r in rows}

    async def prune_cleared(self, before: datetime) -> int:
        """Delete alarms cleared before ``before``."""
        with translated("alarm pruning"):
            async with self._pool.acquire() as conn:
                return await delete_rows(conn, (sql.PRUNE,), before)

    async def delete_user_rows(self, conn: asyncpg.Connection, user_id: str, /) -> int:
        """Take a deleted user's name off the alarms (an ``inbox.erasure`` part; nothing
        is deleted, so nothing is counted)."""
        for statement in sql.FORGET_USER:
            await conn.execute(statement, user_id)
        return 0

    async def delete_mower_rows(self, conn: asyncpg.Connection, mower_id: uuid.UUID, /) -> int:
        """Delete a removed mower's alarms on ``conn`` (an ``inbox.erasure`` part)."""
        return await delete_rows(conn, sql.FORGET_MOWER, mower_id)
