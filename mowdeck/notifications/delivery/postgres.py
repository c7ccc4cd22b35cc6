"""Targets and deliveries in PostgreSQL through an asyncpg pool.

``queue_deliveries`` is what the inbox's ``complete_many`` calls with the new items, on its
connection in its transaction (``inbox.ports`` says why). The claim and the quiet-hours
summaries read the recipient's locale, time zone and quiet hours from the inbox's
``notification_preferences`` in the same statements.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import msgspec
import structlog

from mowdeck.kit.locked_round import BatchedDelete, LockedRound, connection_like
from mowdeck.kit.pg import rows_affected
from mowdeck.notifications.delivery import sql
from mowdeck.notifications.delivery.model import (
    Backlog,
    ClaimedDelivery,
    DeliveryOutcome,
    StoredTarget,
)
from mowdeck.notifications.delivery.plan import summary_due
from mowdeck.notifications.delivery.ports import DeliveryStore, StopListening, TargetStore
from mowdeck.notifications.delivery.targets import Target, WebPushTarget
from mowdeck.notifications.errors import StoreError
from mowdeck.notifications.pg import columns, delete_rows, message_fields, quiet_hours
from mowdeck.notifications.rules.events import RuleEvent
from mowdeck.notifications.rules.quiet import QuietHours
from mowdeck.notifications.rules.templates import SUMMARY_KEY

__all__ = ["PostgresDeliveries", "queue_deliveries"]

log = structlog.get_logger("mowdeck.notifications.delivery.postgres")

_PRUNE_LOCK = 0x6E6F6470  # "nodp"
_PRUNE_BATCH_ROWS = 5000
_PRUNE = BatchedDelete("notification_deliveries", "finished_at", key="id")
_target = msgspec.json.Decoder(Target)
_encode = msgspec.json.Encoder().encode


_CLAIMED = ("id", "target_id", "user_id", "channel", "attempts", "locale", "timezone")


def _stored(row: asyncpg.Record) -> StoredTarget:
    target = _target.decode(row["target"])
    return StoredTarget(target=target, **columns(row, "id", "user_id", "created_at"))


def _claimed(row: asyncpg.Record) -> ClaimedDelivery:
    target = msgspec.json.decode(row["target"])
    return ClaimedDelivery(target=target, **columns(row, *_CLAIMED), **message_fields(row))


async def queue_deliveries(
    conn: asyncpg.Connection, kept: Sequence[tuple[RuleEvent, str, bool]]
) -> None:
    """The delivery rows of new inbox items ``(event, user_id, held)``, in the caller's
    transaction: two statements at most, whatever the number of events."""
    sent = [(user, event) for event, user, held in kept if not held]
    if sent:
        await conn.fetchrow(
            sql.QUEUE_DELIVERIES,
            [user for user, _ in sent],
            [e.kind for _, e in sent],
            [e.mower_id for _, e in sent],
            [e.severity for _, e in sent],
            [e.dedupe_key for _, e in sent],
            [e.message_key for _, e in sent],
            [_encode(e.params).decode() for _, e in sent],
            [e.occurred_at for _, e in sent],
        )
    held = [(user, event) for event, user, is_held in kept if is_held]
    if held:
        now = datetime.now(UTC)
        quiet_of: dict[str, tuple[QuietHours | None, str]] = {}
        for row in await conn.fetch(sql.QUIET_OF, sorted({user for user, _ in held})):
            quiet_of[row["user_id"]] = (quiet_hours(row), row["timezone"])
        users, ends = [], []
        for user, event in held:
            if user in quiet_of:  # held by quiet hours the store does not know: no summary
                quiet, timezone = quiet_of[user]
                users.append(user)
                ends.append(summary_due(quiet, timezone, event.occurred_at, now))
        if users:
            await conn.execute(sql.QUEUE_SUMMARIES, users, ends, SUMMARY_KEY)


class PostgresDeliveries(TargetStore, DeliveryStore):
    """``TargetStore`` and ``DeliveryStore`` on ``pool``; the pruning round's statements
    get ``maintenance_timeout_ms`` (None: the pool's)."""

    def __init__(self, pool: asyncpg.Pool, *, maintenance_timeout_ms: int | None = None) -> None:
        self._pool = pool
        self._maintenance_timeout_ms = maintenance_timeout_ms

    async def add_target(self, user_id: str, target: Target) -> StoredTarget:
        """Register a target; a Web Push endpoint moves to its last registrant."""
        endpoint = target.subscription.endpoint if isinstance(target, WebPushTarget) else None
        channel = str(type(target).__struct_config__.tag)  # the target's channel
        async with self._pool.acquire() as conn, conn.transaction():
            if endpoint is not None:
                await conn.execute(sql.TAKE_ENDPOINT, endpoint, user_id)
            row = await conn.fetchrow(
                sql.PUT_TARGET, user_id, channel, _encode(target).decode(), endpoint
            )
        assert row is not None
        return _stored(row)

    async def list_targets(
        self,
        user_id: str,
        *,
        after: tuple[datetime, uuid.UUID] | None = None,
        limit: int | None = None,
    ) -> list[StoredTarget]:
        """The user's targets, oldest first, behind ``after``."""
        if after is None:
            rows = await self._pool.fetch(sql.LIST_TARGETS, user_id, limit)
        else:
            rows = await self._pool.fetch(sql.LIST_TARGETS_AFTER, user_id, limit, *after)
        return [_stored(r) for r in rows]

    async def delete_target(self, user_id: str, target_id: uuid.UUID) -> bool:
        """Delete the user's target."""
        return rows_affected(await self._pool.execute(sql.DELETE_TARGET, user_id, target_id)) == 1

    async def claim_deliveries(
        self, now: datetime, limit: int, lease: timedelta
    ) -> list[ClaimedDelivery]:
        """Claim due deliveries in a short transaction of its own."""
        try:
            rows = await self._pool.fetch(sql.CLAIM, now, limit, lease)
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as err:
            raise StoreError(f"delivery claim failed: {err}") from err
        return sorted((_claimed(r) for r in rows), key=lambda c: c.id)

    async def record_deliveries(self, now: datetime, outcomes: Sequence[DeliveryOutcome]) -> None:
        """Finish, reschedule, or drop with their target, in one transaction."""
        finished = [o for o in outcomes if o.outcome in ("sent", "failed")]
        retries = [o for o in outcomes if o.outcome == "retry"]
        gone = sorted({o.target_id for o in outcomes if o.outcome == "gone"}, key=lambda t: t.int)
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                if finished:
                    await conn.execute(sql.FINISH, now, *_columns(finished, "outcome", "error"))
                if retries:
                    await conn.execute(sql.RETRY, *_columns(retries, "next_attempt_at", "error"))
                if gone:
                    await conn.execute(sql.DELETE_TARGETS_BY_ID, gone)
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as err:
            raise StoreError(f"delivery record failed: {err}") from err

    async def delivery_backlog(self, now: datetime) -> Backlog:
        """Due deliveries and the oldest due time."""
        row = await self._pool.fetchrow(sql.BACKLOG, now)
        assert row is not None
        return Backlog(row["due"], row["oldest"])

    async def prune_deliveries(self, before: datetime) -> int | None:
        """Delete finished deliveries under the prune lock (one replica at a time)."""
        pool = self._pool
        round_ = LockedRound(
            _PRUNE_LOCK,
            lambda: connection_like(pool),
            statement_timeout_ms=self._maintenance_timeout_ms,
        )
        deleted = await round_.delete([(_PRUNE, before)], _PRUNE_BATCH_ROWS)
        return None if deleted is None else deleted.get(_PRUNE.table, 0)

    async def listen_deliveries(self, wake: Callable[[], None]) -> StopListening:
        """LISTEN on a connection of its own (not the pool's, which it would pin)."""
        conn = await connection_like(self._pool)

        def notified(*_: Any) -> None:
            wake()

        def lost(_: Any) -> None:
            log.warning("delivery notifications connection lost; polling only")

        await conn.add_listener(sql.CHANNEL, notified)
        conn.add_termination_listener(lost)

        async def stop() -> None:
            conn.remove_termination_listener(lost)
            if not conn.is_closed():
                await conn.close(timeout=5)

        return stop

    async def delete_user_rows(self, conn: asyncpg.Connection, user_id: str, /) -> int:
        """Delete the user's deliveries and targets on ``conn`` (an ``inbox.erasure`` part)."""
        return await delete_rows(conn, sql.DELETE_USER, user_id)

    async def delete_mower_rows(self, conn: asyncpg.Connection, mower_id: uuid.UUID, /) -> int:
        """Delete the mower's deliveries on ``conn`` (an ``inbox.erasure`` part)."""
        return await delete_rows(conn, sql.FORGET_MOWER, mower_id)


def _columns(outcomes: Sequence[DeliveryOutcome], *names: str) -> list[list[Any]]:
    columns: list[list[Any]] = [[o.id for o in outcomes], [o.attempts for o in outcomes]]
    columns.extend([getattr(o, name) for o in outcomes] for name in names)
    return columns
