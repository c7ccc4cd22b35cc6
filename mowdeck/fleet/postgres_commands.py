"""PostgreSQL adapters of the command log (working set and audit trail) and its reads.

Every write is one statement: data-modifying CTEs put a batch into the working set, the
audit trail and the open commands at once, atomic without BEGIN/COMMIT round trips.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from contracts.v1 import FINAL_STATUSES, CommandResult
from mowdeck.fleet.errors import UnstorableError
from mowdeck.fleet.ports import (
    UNANSWERED_REASON,
    AuditEntry,
    AuditQuery,
    AuditStatus,
    CommandRecord,
    StatusRecord,
)
from mowdeck.fleet.postgres import RepositoryUnavailableError, failed, refuses_data

__all__ = ["PostgresAuditTrail", "PostgresCommandLog"]

# The statements spell out the final statuses (contracts' FINAL_STATUSES; a unit test
# holds them to it).

_INSERT_COMMANDS = (
    "WITH c AS (SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[],"
    " $5::text[], $6::timestamptz[], $7::timestamptz[], $8::jsonb[])"
    " AS c(command_id, mower_id, account_id, kind, issued_by, issued_at, expires_at, command)),"
    " working AS (INSERT INTO fleet_commands (command_id, mower_id, account_id, kind,"
    " issued_by, issued_at, expires_at) SELECT command_id, mower_id, account_id, kind,"
    " issued_by, issued_at, expires_at FROM c ON CONFLICT DO NOTHING RETURNING command_id),"
    " open AS (INSERT INTO fleet_open_commands (command_id, mower_id, expires_at)"
    " SELECT c.command_id, c.mower_id, c.expires_at FROM c JOIN working USING (command_id)"
    " ON CONFLICT DO NOTHING)"
    " INSERT INTO fleet_audit_commands (command_id, account_id, mower_id, kind, command,"
    " issued_by, issued_at, expires_at) SELECT command_id, account_id, mower_id, kind, command,"
    " issued_by, issued_at, expires_at FROM c ON CONFLICT DO NOTHING"
)
# A final status of the gateway after another of its own (a restored stream redelivering
# a command the database holds as answered, now expired) is not recorded: the first
# stands. Fleet's own ``failed`` for an unanswered command may still be followed by the
# gateway's late true one (the audit trail says who said what).
_INSERT_STATUSES = (
    "WITH given AS (SELECT * FROM unnest($1::uuid[], $2::text[], $3::uuid[],"
    " $4::timestamptz[], $5::text[]) AS g(command_id, status, mower_id, at, reason)),"
    " r AS (SELECT * FROM given g WHERE g.status NOT IN ('executed', 'expired', 'failed',"
    " 'rejected') OR NOT EXISTS (SELECT 1 FROM fleet_audit_statuses a"
    " WHERE a.command_id = g.command_id AND a.source = 'gateway' AND a.status <> g.status"
    " AND a.status IN ('executed', 'expired', 'failed', 'rejected'))),"
    " working AS (INSERT INTO fleet_command_statuses (command_id, status, mower_id, at, reason)"
    " SELECT * FROM r ON CONFLICT DO NOTHING),"
    " settled AS (DELETE FROM fleet_open_commands WHERE command_id IN"
    " (SELECT command_id FROM r WHERE status IN ('executed', 'expired', 'failed', 'rejected')))"
    " INSERT INTO fleet_audit_statuses (command_id, status, source, at, reason)"
    " SELECT command_id, status, 'gateway', at, reason FROM r ON CONFLICT DO NOTHING"
)
# $1 expired before, $2 at, $3 reason, then the claim's own parameters. What is claimed
# leaves the open commands; those a final status reached meanwhile get no second one.
_FINALIZE = (
    "WITH due AS (DELETE FROM fleet_open_commands WHERE command_id IN ({claim})"
    " RETURNING command_id, mower_id),"
    " lost AS (SELECT d.command_id, d.mower_id FROM due d WHERE NOT EXISTS"
    " (SELECT 1 FROM fleet_command_statuses s WHERE s.command_id = d.command_id"
    " AND s.status IN ('executed', 'expired', 'failed', 'rejected'))),"
    " working AS (INSERT INTO fleet_command_statuses (command_id, status, mower_id, at, reason)"
    " SELECT command_id, 'failed', mower_id, $2, $3 FROM lost ON CONFLICT DO NOTHING),"
    " audit AS (INSERT INTO fleet_audit_statuses (command_id, status, source, at, reason)"
    " SELECT command_id, 'failed', 'fleet', $2, $3 FROM lost ON CONFLICT DO NOTHING)"
    " SELECT command_id, mower_id FROM lost"
)
# Replicas share the rounds: each skips the rows another round holds.
_CLAIM_DUE = (
    "SELECT command_id FROM fleet_open_commands WHERE expires_at < $1"
    " ORDER BY expires_at LIMIT $4 FOR UPDATE SKIP LOCKED"
)
# A waiter settles its own command: it waits for a round holding the row, then finds
# the row gone and reads the status that round recorded.
_CLAIM_ONE = "SELECT command_id FROM fleet_open_commands WHERE command_id = $4 AND expires_at < $1"


def _unavailable(err: Exception) -> RepositoryUnavailableError:
    return RepositoryUnavailableError(f"command log: {err}")


class PostgresCommandLog:
    """``CommandLog`` on the working set (``fleet_commands``, ``fleet_command_statuses``),
    the audit trail (``fleet_audit_*``) and ``fleet_open_commands``."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def record(
        self, commands: Sequence[CommandRecord], results: Sequence[CommandResult]
    ) -> None:
        """Store a batch atomically; repeats change nothing."""
        statements: list[tuple[str, list[Any]]] = []
        if commands:
            columns = [
                [c.command_id for c in commands],
                [c.mower_id for c in commands],
                [c.account_id for c in commands],
                [c.kind for c in commands],
                [c.issued_by for c in commands],
                [c.issued_at for c in commands],
                [c.expires_at for c in commands],
                [c.command for c in commands],
            ]
            statements.append((_INSERT_COMMANDS, columns))
        if results:
            columns = [
                [r.command_id for r in results],
                [r.status for r in results],
                [r.mower_id for r in results],
                [r.at for r in results],
                [r.reason for r in results],
            ]
            statements.append((_INSERT_STATUSES, columns))
        try:
            if len(statements) == 1:
                # One statement is atomic on its own: no BEGIN/COMMIT round trips.
                await self._pool.execute(statements[0][0], *statements[0][1])
            elif statements:
                async with self._pool.acquire() as conn, conn.transaction():
                    for query, args in statements:
                        await conn.execute(query, *args)
        except asyncpg.PostgresError as err:
            if refuses_data(err):
                raise UnstorableError(f"command log refuses the data: {err}") from err
            raise _unavailable(err) from err
        except OSError as err:
            raise _unavailable(err) from err

    async def lookup(
        self, command_id: uuid.UUID
    ) -> tuple[CommandRecord | None, list[StatusRecord]]:
        """A command and its statuses in time order."""
        try:
            async with self._pool.acquire() as conn:
                row = await conn.fetchrow(
                    "SELECT command_id, mower_id, account_id, kind, issued_by, issued_at,"
                    " expires_at FROM fleet_commands WHERE command_id = $1",
                    command_id,
                )
                rows = await conn.fetch(
                    "SELECT status, at, reason FROM fleet_command_statuses"
                    " WHERE command_id = $1 ORDER BY at, status",
                    command_id,
                )
        except (asyncpg.PostgresError, OSError) as err:
            raise _unavailable(err) from err
        command = CommandRecord(**dict(row)) if row is not None else None
        return command, [StatusRecord(r["status"], r["at"], r["reason"]) for r in rows]

    async def finalize_overdue(
        self, expired_before: datetime, *, at: datetime, limit: int
    ) -> list[CommandResult]:
        """Record overdue open commands as failed (outcome unknown); what was recorded."""
        query = _FINALIZE.format(claim=_CLAIM_DUE)
        try:
            rows = await self._pool.fetch(query, expired_before, at, UNANSWERED_REASON, limit)
        except (asyncpg.PostgresError, OSError) as err:
            raise _unavailable(err) from err
        return [
            CommandResult(
                command_id=r["command_id"],
                mower_id=r["mower_id"],
                status="failed",
                at=at,
                reason=UNANSWERED_REASON,
            )
            for r in rows
        ]

    async def settle(
        self, command_id: uuid.UUID, expired_before: datetime, *, at: datetime
    ) -> StatusRecord | None:
        """Finalize one command if it is overdue; its first final status, or None."""
        query = _FINALIZE.format(claim=_CLAIM_ONE)
        try:
            await self._pool.fetch(query, expired_before, at, UNANSWERED_REASON, command_id)
        except (asyncpg.PostgresError, OSError) as err:
            raise _unavailable(err) from err
        _, statuses = await self.lookup(command_id)
        return _first_final(statuses)


def _first_final(statuses: Sequence[StatusRecord]) -> StatusRecord | None:
    return next((s for s in statuses if s.status in FINAL_STATUSES), None)


_PAGE = (
    "SELECT command_id, account_id, mower_id, kind, command::text AS command, issued_by,"
    " issued_at, expires_at FROM fleet_audit_commands WHERE account_id = $1"
    " AND ($2::uuid IS NULL OR mower_id = $2) AND ($3::timestamptz IS NULL OR issued_at >= $3)"
    " AND ($4::timestamptz IS NULL OR issued_at < $4) AND ($5::text IS NULL OR kind = $5)"
    " AND ($6::timestamptz IS NULL OR (issued_at, command_id) < ($6, $7::uuid))"
    " AND ($9::uuid[] IS NULL OR mower_id = ANY($9::uuid[]))"
    " ORDER BY issued_at DESC, command_id DESC LIMIT $8"
)
_STATUSES = (
    "SELECT command_id, status, source, at, reason FROM fleet_audit_statuses"
    " WHERE command_id = ANY($1::uuid[]) ORDER BY at, status, source"
)


class PostgresAuditTrail:
    """``AuditTrail`` on ``fleet_audit_commands`` and ``fleet_audit_statuses``."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def page(self, query: AuditQuery) -> list[AuditEntry]:
        """Up to ``query.limit`` commands matching ``query``, newest first."""
        before_at, before_id = query.before if query.before is not None else (None, None)
        try:
            async with self._pool.acquire() as conn:
                rows = await conn.fetch(
                    _PAGE,
                    query.account_id,
                    query.mower_id,
                    query.since,
                    query.until,
                    query.kind,
                    before_at,
                    before_id,
                    query.limit,
                    None if query.mower_ids is None else list(query.mower_ids),
                )
                found = await conn.fetch(_STATUSES, [r["command_id"] for r in rows])
        except (asyncpg.PostgresError, OSError) as err:
            raise failed("audit trail", err) from err
        statuses: dict[uuid.UUID, list[AuditStatus]] = {}
        for s in found:
            statuses.setdefault(s["command_id"], []).append(
                AuditStatus(status=s["status"], at=s["at"], reason=s["reason"], source=s["source"])
            )
        return [
            AuditEntry(
                command_id=r["command_id"],
                account_id=r["account_id"],
                mower_id=r["mower_id"],
                kind=r["kind"],
                command=msgspec.Raw(r["command"].encode()) if r["command"] is not None else None,
                issued_by=r["issued_by"],
                issued_at=r["issued_at"],
                expires_at=r["expires_at"],
                statuses=statuses.get(r["command_id"], []),
            )
            for r in rows
        ]
