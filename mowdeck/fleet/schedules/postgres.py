"""PostgreSQL adapters of the schedule store and the site directory.

A claim is one transaction: it locks due schedules (``FOR UPDATE SKIP LOCKED``, or one
replica at a time under an advisory lock), and on commit writes the slots decided, the
commands issued (command log, audit trail, outbox) and the next dues together. A replica
that dies before the commit leaves the slots undecided; one that dies after it leaves
the commands in the outbox, which any replica publishes under the same command ids.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, Literal

import asyncpg

from mowdeck.fleet.errors import MowerNotFoundError
from mowdeck.fleet.postgres import failed
from mowdeck.fleet.postgres_commands import _INSERT_COMMANDS
from mowdeck.fleet.schedules.codec import TaskTexts, row_state, slot_columns, stored_of, tasks_text
from mowdeck.fleet.schedules.plan import Restriction, ScheduleState, SlotRecord
from mowdeck.fleet.schedules.ports import Claim, Mowers, Sending, SiteZone, StoredSchedule

__all__ = ["ClaimMode", "PostgresScheduleStore", "PostgresSiteDirectory"]

ClaimMode = Literal["skip_locked", "advisory"]
# pg_advisory_xact_lock key of the advisory claim mode ('mowsched' as an integer).
_ADVISORY_KEY = 0x6D6F7773636864

_STATE = (
    "SELECT s.mower_id, s.account_id, s.enabled, s.tasks::text AS tasks,"
    " COALESCE(site.timezone, s.timezone, 'UTC') AS tz, s.hold, s.hold_until, s.due_kind,"
    " s.slot_start, s.slot_end, s.slot_task, s.slot_area, r.restriction_id, r.site_id,"
    " r.reason, r.until, r.created_at, r.created_by, {decided} AS decided"
    " FROM fleet_schedules s JOIN fleet_mowers m USING (mower_id)"
    " LEFT JOIN fleet_sites site ON site.site_id = m.site_id"
    " LEFT JOIN LATERAL (SELECT * FROM fleet_site_restrictions x WHERE x.site_id = m.site_id"
    " AND x.until > $1 ORDER BY x.until DESC LIMIT 1) r ON true"
)
_DECIDED = (
    "(SELECT d.state FROM fleet_schedule_slots d WHERE d.mower_id = s.mower_id"
    " AND d.slot_start = s.slot_start AND s.due_kind = 'start')"
)
_DUE = (
    _STATE.format(decided=_DECIDED)
    + " WHERE s.due_at <= $3 AND (s.due_at <= $1 OR s.due_kind = 'start')"
    " ORDER BY s.due_at LIMIT $2 FOR UPDATE OF s{skip}"
)
_LOCK = (
    _STATE.format(decided=_DECIDED)
    + " WHERE s.mower_id = ANY($2::uuid[]) OR m.site_id = $3 ORDER BY s.mower_id FOR UPDATE OF s"
)
_ONE = _STATE.format(decided="NULL") + " WHERE s.mower_id = $2"
_PUT = (
    "INSERT INTO fleet_schedules (mower_id, account_id, enabled, tasks, timezone, due_at,"
    " due_kind, slot_start, slot_end, slot_task, slot_area, updated_at)"
    " VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8, $9, $10, $11, $12)"
    " ON CONFLICT (mower_id) DO UPDATE SET enabled = $3, tasks = $4::jsonb, timezone = $5,"
    " due_at = $6, due_kind = $7, slot_start = $8, slot_end = $9, slot_task = $10,"
    " slot_area = $11, updated_at = $12"
)
# A slot's start is inserted once: a second start of it fails the whole claim.
_STARTS = (
    "INSERT INTO fleet_schedule_slots (mower_id, slot_start, slot_end, task, state, reason,"
    " start_command_id, decided_at) SELECT *, $8 FROM unnest($1::uuid[], $2::timestamptz[],"
    " $3::timestamptz[], $4::int[], $5::text[], $6::text[], $7::uuid[])"
    " ON CONFLICT DO NOTHING RETURNING mower_id"
)
_ENDS = (
    "INSERT INTO fleet_schedule_slots AS d (mower_id, slot_start, slot_end, task, state, reason,"
    " end_command_id, decided_at) SELECT *, $8 FROM unnest($1::uuid[], $2::timestamptz[],"
    " $3::timestamptz[], $4::int[], $5::text[], $6::text[], $7::uuid[])"
    " ON CONFLICT (mower_id, slot_start) DO UPDATE SET state = EXCLUDED.state,"
    " reason = COALESCE(EXCLUDED.reason, d.reason), end_command_id = EXCLUDED.end_command_id,"
    " decided_at = EXCLUDED.decided_at"
)
_OUTBOX = (
    "INSERT INTO fleet_schedule_outbox (command_id, mower_id, body, publish_at, owed_since)"
    " SELECT c, m, b, p, p FROM unnest($1::uuid[], $2::uuid[], $3::bytea[], $4::timestamptz[])"
    " AS o(c, m, b, p)"
)
# A dock withdraws the mower's starts claimed ahead and not yet published (waiting for a
# replica that is publishing one: after it, the dock goes out second).
_WITHDRAW = "DELETE FROM fleet_schedule_outbox WHERE mower_id = ANY($1::uuid[]) AND publish_at > $2"
_TAKE = (
    "DELETE FROM fleet_schedule_outbox WHERE command_id = ANY($1::uuid[])"
    " RETURNING command_id, mower_id, body, publish_at, owed_since"
)
_PUT_BACK = (
    "INSERT INTO fleet_schedule_outbox (command_id, mower_id, body, publish_at, owed_since)"
    " VALUES ($1, $2, $3, $4, $5)"
)
_NEXT = (
    "UPDATE fleet_schedules s SET due_at = u.due_at, due_kind = u.due_kind,"
    " slot_start = u.slot_start, slot_end = u.slot_end, slot_task = u.slot_task,"
    " slot_area = u.slot_area, hold = u.hold, hold_until = u.hold_until"
    " FROM unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::timestamptz[],"
    " $5::timestamptz[], $6::int[], $7::text[], $8::text[], $9::timestamptz[])"
    " AS u(mower_id, due_at, due_kind, slot_start, slot_end, slot_task, slot_area, hold,"
    " hold_until) WHERE s.mower_id = u.mower_id"
)
_RESTRICT = (
    "INSERT INTO fleet_site_restrictions (restriction_id, site_id, reason, until, created_at,"
    " created_by) VALUES ($1, $2, $3, $4, $5, $6)"
)
_UNPUBLISHED = (
    "UPDATE fleet_schedule_outbox SET owed_since = $2 WHERE command_id IN (SELECT command_id"
    " FROM fleet_schedule_outbox WHERE owed_since < $1 ORDER BY owed_since LIMIT $3"
    " FOR UPDATE SKIP LOCKED) RETURNING command_id, body"
)


class DoubleStartError(RuntimeError):
    """A claim tried to start a slot already decided (its transaction is rolled back)."""


class PostgresScheduleStore:
    """``ScheduleStore`` on ``fleet_schedules``, ``fleet_schedule_slots``,
    ``fleet_site_restrictions`` and ``fleet_schedule_outbox``."""

    def __init__(self, pool: asyncpg.Pool, *, mode: ClaimMode = "skip_locked") -> None:
        self._pool = pool
        self._mode = mode
        self._tasks = TaskTexts()

    async def put(self, schedule: StoredSchedule, state: ScheduleState) -> None:
        """Store a schedule with its first due (a park on it is kept)."""
        due = state.due
        slot = due.slot if due is not None else None
        try:
            await self._pool.execute(
                _PUT,
                schedule.mower_id,
                schedule.account_id,
                schedule.enabled,
                tasks_text(schedule.tasks),
                schedule.timezone,
                due.at if due is not None else None,
                due.kind if due is not None else None,
                slot.start if slot else None,
                slot.end if slot else None,
                slot.task if slot else None,
                slot.work_area if slot else None,
                schedule.updated_at,
            )
        except asyncpg.ForeignKeyViolationError as err:
            raise MowerNotFoundError(f"mower {schedule.mower_id} is not registered") from err
        except (asyncpg.PostgresError, OSError) as err:
            raise failed("schedules", err) from err

    async def get(self, mower_id: uuid.UUID, now: datetime) -> ScheduleState | None:
        """A mower's schedule state at ``now``."""
        try:
            row = await self._pool.fetchrow(_ONE, now, mower_id)
        except (asyncpg.PostgresError, OSError) as err:
            raise failed("schedules", err) from err
        return None if row is None else row_state(row, self._tasks)

    async def stored(self, mower_id: uuid.UUID) -> StoredSchedule | None:
        """A mower's schedule as set."""
        try:
            row = await self._pool.fetchrow(
                "SELECT mower_id, account_id, enabled, tasks::text AS tasks, timezone,"
                " updated_at FROM fleet_schedules WHERE mower_id = $1",
                mower_id,
            )
        except (asyncpg.PostgresError, OSError) as err:
            raise failed("schedules", err) from err
        return None if row is None else stored_of(row, self._tasks)

    async def recent_slots(self, mower_id: uuid.UUID, limit: int) -> list[SlotRecord]:
        """The mower's latest recorded slots, newest first."""
        try:
            rows = await self._pool.fetch(
                "SELECT slot_start, slot_end, task, state, reason,"
                " COALESCE(end_command_id, start_command_id) AS command_id"
                " FROM fleet_schedule_slots WHERE mower_id = $1 ORDER BY slot_start DESC LIMIT $2",
                mower_id,
                limit,
            )
        except (asyncpg.PostgresError, OSError) as err:
            raise failed("schedules", err) from err
        return [SlotRecord(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows]

    @asynccontextmanager
    async def claim_due(
        self, now: datetime, limit: int, starts_until: datetime | None = None
    ) -> AsyncIterator[Claim]:
        """Lock up to ``limit`` due schedules no other claim holds; write on exit."""
        until = max(now, starts_until or now)
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                rows: list[Any] = []
                if self._mode == "skip_locked":
                    rows = await conn.fetch(_DUE.format(skip=" SKIP LOCKED"), now, limit, until)
                elif await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", _ADVISORY_KEY):
                    rows = await conn.fetch(_DUE.format(skip=""), now, limit, until)
                claim = Claim([row_state(r, self._tasks) for r in rows])
                yield claim
                await _write(conn, claim, now)
        except (asyncpg.PostgresError, OSError) as err:
            raise failed("scheduler", err) from err

    @asynccontextmanager
    async def lock(self, mowers: Mowers, now: datetime) -> AsyncIterator[Claim]:
        """Lock the schedules of ``mowers``; write on exit."""
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                rows = await conn.fetch(_LOCK, now, list(mowers.mower_ids), mowers.site_id)
                claim = Claim([row_state(r, self._tasks) for r in rows])
                yield claim
                await _write(conn, claim, now)
        except (asyncpg.PostgresError, OSError) as err:
            raise failed("schedules", err) from err

    async def next_due(self) -> datetime | None:
        """When the earliest schedule is due."""
        try:
            value = await self._pool.fetchval("SELECT min(due_at) FROM fleet_schedules")
        except (asyncpg.PostgresError, OSError) as err:
            raise failed("scheduler", err) from err
        return value if isinstance(value, datetime) else None

    async def restrictions(self, site_id: uuid.UUID, now: datetime) -> list[Restriction]:
        """The site's restrictions not ended at ``now``, by end."""
        try:
            rows = await self._pool.fetch(
                "SELECT restriction_id, site_id, reason, until, created_at, created_by"
                " FROM fleet_site_restrictions WHERE site_id = $1 AND until > $2 ORDER BY until",
                site_id,
                now,
            )
        except (asyncpg.PostgresError, OSError) as err:
            raise failed("restrictions", err) from err
        return [Restriction(*r) for r in rows]

    async def remove_restriction(self, site_id: uuid.UUID, restriction_id: uuid.UUID) -> bool:
        """Delete a restriction; whether it existed."""
        try:
            done = await self._pool.execute(
                "DELETE FROM fleet_site_restrictions WHERE site_id = $1 AND restriction_id = $2",
                site_id,
                restriction_id,
            )
        except (asyncpg.PostgresError, OSError) as err:
            raise failed("restrictions", err) from err
        return bool(done != "DELETE 0")

    async def unpublished(
        self, older_than: datetime, now: datetime, limit: int
    ) -> list[tuple[uuid.UUID, bytes]]:
        """Commands owed since before ``older_than``; each taken (re-dated) by one caller."""
        try:
            rows = await self._pool.fetch(_UNPUBLISHED, older_than, now, limit)
        except (asyncpg.PostgresError, OSError) as err:
            raise failed("scheduler outbox", err) from err
        return [(r[0], bytes(r[1])) for r in rows]

    @asynccontextmanager
    async def sending(self, command_ids: Sequence[uuid.UUID]) -> AsyncIterator[Sending]:
        """Hold the still-owed commands while they are published; forget those done.

        The rows are deleted at once and the deletion commits after the publishes: a dock
        that would withdraw one waits for it, and a replica that dies meanwhile rolls the
        deletion back, leaving them owed. Those not done are put back.
        """
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                rows = await conn.fetch(_TAKE, list(command_ids))
                sending = Sending({r[0] for r in rows})
                yield sending
                done = set(sending.done)
                kept = [r for r in rows if r[0] not in done]
                if kept:
                    await conn.executemany(_PUT_BACK, [tuple(r) for r in kept])
        except (asyncpg.PostgresError, OSError) as err:
            raise failed("scheduler outbox", err) from err

    async def published(self, command_ids: Sequence[uuid.UUID]) -> None:
        """Forget commands the bus stored."""
        try:
            await self._pool.execute(
                "DELETE FROM fleet_schedule_outbox WHERE command_id = ANY($1::uuid[])",
                list(command_ids),
            )
        except (asyncpg.PostgresError, OSError) as err:
            raise failed("scheduler outbox", err) from err


async def _write(conn: asyncpg.Connection, claim: Claim, now: datetime) -> None:
    """Everything a claim decided, in its transaction."""
    starts, ends, nexts = slot_columns(claim.decisions)
    if starts[0]:
        stored = await conn.fetch(_STARTS, *starts, now)
        if len(stored) != len(starts[0]):
            raise DoubleStartError("a slot was decided twice; the claim is rolled back")
    if ends[0]:
        await conn.execute(_ENDS, *ends, now)
    docked = [s.mower_id for s, d, _ in claim.decisions if d.order and d.order.kind != "start_mow"]
    if docked:
        await conn.execute(_WITHDRAW, docked, now)
    issued = [i for _, _, i in claim.decisions if i is not None]
    if issued:
        records = [i.record for i in issued]
        await conn.execute(
            _INSERT_COMMANDS,
            [c.command_id for c in records],
            [c.mower_id for c in records],
            [c.account_id for c in records],
            [c.kind for c in records],
            [c.issued_by for c in records],
            [c.issued_at for c in records],
            [c.expires_at for c in records],
            [c.command for c in records],
        )
        await conn.execute(
            _OUTBOX,
            [c.command_id for c in records],
            [c.mower_id for c in records],
            [i.body for i in issued],
            [i.publish_at for i in issued],
        )
    if nexts[0]:
        await conn.execute(_NEXT, *nexts)
    r = claim.restriction
    if r is not None:
        await conn.execute(
            _RESTRICT, r.restriction_id, r.site_id, r.reason, r.until, r.created_at, r.created_by
        )


class PostgresSiteDirectory:
    """``SiteDirectory`` on ``fleet_sites`` and ``fleet_mowers.site_id``."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def site_of(self, mower_id: uuid.UUID) -> SiteZone | None:
        """The site of a mower, or None."""
        try:
            row = await self._pool.fetchrow(
                "SELECT s.site_id, s.timezone FROM fleet_mowers m"
                " JOIN fleet_sites s ON s.site_id = m.site_id WHERE m.mower_id = $1",
                mower_id,
            )
        except (asyncpg.PostgresError, OSError) as err:
            raise failed("sites", err) from err
        return None if row is None else SiteZone(row[0], row[1])

    async def account_of(self, site_id: uuid.UUID) -> uuid.UUID | None:
        """The account of a site, or None."""
        try:
            value = await self._pool.fetchval(
                "SELECT account_id FROM fleet_sites WHERE site_id = $1", site_id
            )
        except (asyncpg.PostgresError, OSError) as err:
            raise failed("sites", err) from err
        return value if isinstance(value, uuid.UUID) else None
