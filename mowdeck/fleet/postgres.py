"""PostgreSQL adapters (asyncpg): registry row and its event's row in one transaction.

The events wait for the relay in the table ``fleet_outbox`` (named before the relay was;
renaming a table is a migration not worth its risk).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import msgspec
import structlog

from contracts.v1 import Connection, MowerRegistration
from mowdeck.fleet.errors import (
    EndpointTakenError,
    FleetError,
    InvalidRequestError,
    MowerExistsError,
    MowerNotFoundError,
    ValueRefusedError,
    VersionConflictError,
)
from mowdeck.fleet.ports import (
    EndpointClash,
    MowerRecord,
    PruneCutoffs,
    RegistryEvent,
    RelayClaim,
    RelayStats,
)
from mowdeck.kit.locked_round import BatchedDelete, LockedRound, connection_like
from mowdeck.kit.pg import delete_in_batches, keep_session, session_settings

__all__ = [
    "PostgresMowerRepository",
    "PostgresPruning",
    "RepositoryUnavailableError",
    "failed",
    "pool_options",
]

log = structlog.get_logger("mowdeck.fleet.postgres")
# One relay at a time publishes, so events leave in commit order even with replicas.
_RELAY_LOCK = 0x666C6F62  # "flob"
# One replica at a time prunes (a session lock: it spans many committed batches).
_PRUNE_LOCK = 0x666C7072  # "flpr"
# Replicas filling in endpoint keys at start take turns (0005_endpoint_keys.sql).
_KEYS_LOCK = 0x666C656B  # "flek"
_ENDPOINT_INDEX = "fleet_mowers_endpoint_key"
_COLUMNS = (
    "mower_id, account_id, name, connection_kind, connection_options, version,"
    " created_at, updated_at, endpoint_key, site_id"
)
PAGE_OF_ACCOUNT = (
    f"SELECT {_COLUMNS} FROM fleet_mowers"  # noqa: S608 - no input in the text
    " WHERE account_id = $1 AND mower_id = ANY($2::uuid[])"
    " AND (name, mower_id) > ($3, $4) ORDER BY name, mower_id LIMIT $5"
)
"""A page of ``GET /v1/mowers``: by keyset on ``fleet_mowers_account_name``, no OFFSET."""
_EVENT_INSERT = (
    "INSERT INTO fleet_outbox (event_id, subject, body, created_at) VALUES ($1, $2, $3, $4)"
)


def pool_options(max_size: int, *, statement_timeout_ms: int) -> dict[str, Any]:
    """Options of Fleet's pool (``asyncpg.create_pool``)."""
    return {
        "min_size": 1,
        "max_size": max_size,
        "server_settings": session_settings(statement_timeout_ms),
        # Nothing on Fleet's pool changes session state: the relay's locks are
        # transaction-level, pruning locks on a connection of its own.
        "reset": keep_session,
        # No idle-close timer armed on every release (the pool stays small anyway).
        "max_inactive_connection_lifetime": 0,
    }


class RepositoryUnavailableError(FleetError):
    """PostgreSQL could not be reached or failed the statement."""


def _record(row: asyncpg.Record) -> MowerRecord:
    return MowerRecord(
        registration=MowerRegistration(
            mower_id=row["mower_id"],
            account_id=row["account_id"],
            name=row["name"],
            connection=Connection(
                kind=row["connection_kind"], options=msgspec.json.decode(row["connection_options"])
            ),
            site_id=row["site_id"],
        ),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        version=row["version"],
        endpoint_key=row["endpoint_key"],
    )


def _no_site(site_id: uuid.UUID | None) -> InvalidRequestError:
    # The site was removed between the check and the write.
    return InvalidRequestError("site_id", f"`site_id`: no site {site_id} in this account")


def _taken(err: asyncpg.UniqueViolationError) -> bool:
    return getattr(err, "constraint_name", None) == _ENDPOINT_INDEX


def refuses_data(err: asyncpg.PostgresError) -> bool:
    # Class 22 (data exception): a value no retry makes storable, such as a NUL character
    # in text (22021) or a number out of range.
    sqlstate = str(getattr(err, "sqlstate", None) or "")
    return isinstance(err, asyncpg.DataError) or sqlstate.startswith("22")


def failed(what: str, err: asyncpg.PostgresError | OSError) -> FleetError:
    """A database error on a request's path as Fleet's error: a refused value is the
    request's (``ValueRefusedError``), anything else an outage."""
    if isinstance(err, asyncpg.PostgresError) and refuses_data(err):
        log.info("database refused a value of a request", what=what, error=str(err))
        return ValueRefusedError(f"{what}: a value of the request is out of the stored range")
    return RepositoryUnavailableError(f"{what}: {err}")


def _event_args(event: RegistryEvent) -> tuple[Any, ...]:
    return (event.event_id, event.subject, event.body, event.created_at)


class PostgresMowerRepository:
    """``MowerRepository`` on ``fleet_mowers`` and ``fleet_outbox``; the pool is the caller's."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def add(self, record: MowerRecord, event: RegistryEvent) -> None:
        """Store a new mower and its event in one transaction."""
        reg = record.registration
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                await conn.execute(
                    f"INSERT INTO fleet_mowers ({_COLUMNS})"  # noqa: S608 - constant columns
                    " VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)",
                    reg.mower_id,
                    reg.account_id,
                    reg.name,
                    reg.connection.kind,
                    msgspec.json.encode(reg.connection.options).decode(),
                    record.version,
                    record.created_at,
                    record.updated_at,
                    record.endpoint_key,
                    reg.site_id,
                )
                await conn.execute(_EVENT_INSERT, *_event_args(event))
        except asyncpg.ForeignKeyViolationError as err:
            raise _no_site(reg.site_id) from err
        except asyncpg.UniqueViolationError as err:
            if _taken(err):
                raise EndpointTakenError from err
            raise MowerExistsError(f"mower {reg.mower_id} is already registered") from err
        except (asyncpg.PostgresError, OSError) as err:
            raise failed("registry", err) from err

    async def get(self, mower_id: uuid.UUID) -> MowerRecord | None:
        """One mower, or None."""
        rows = await self._fetch(
            f"SELECT {_COLUMNS} FROM fleet_mowers WHERE mower_id = $1",  # noqa: S608
            mower_id,
        )
        return _record(rows[0]) if rows else None

    async def get_many(self, mower_ids: Sequence[uuid.UUID]) -> list[MowerRecord]:
        """The registered mowers among ``mower_ids``, by name then id."""
        rows = await self._fetch(
            f"SELECT {_COLUMNS} FROM fleet_mowers WHERE mower_id = ANY($1::uuid[])"  # noqa: S608
            " ORDER BY name, mower_id",
            list(mower_ids),
        )
        return [_record(r) for r in rows]

    async def page_of_account(
        self,
        account_id: uuid.UUID,
        mower_ids: Sequence[uuid.UUID],
        after: tuple[str, uuid.UUID] | None,
        limit: int,
    ) -> list[MowerRecord]:
        """Up to ``limit`` of the account's mowers among ``mower_ids`` behind ``after``."""
        name, mower_id = after if after is not None else ("", uuid.UUID(int=0))
        # ``after`` None reads from the start: every name sorts at or after "" and the
        # null id, and a mower named "" cannot be registered.
        rows = await self._fetch(
            PAGE_OF_ACCOUNT,
            account_id,
            list(mower_ids),
            name,
            mower_id,
            limit,
        )
        return [_record(r) for r in rows]

    async def all_registrations(self) -> list[MowerRegistration]:
        """Every registration a gateway may link."""
        rows = await self._fetch(f"SELECT {_COLUMNS} FROM fleet_mowers WHERE NOT unlinkable")  # noqa: S608
        return [_record(r).registration for r in rows]

    async def update(
        self, record: MowerRecord, event: RegistryEvent, expected_version: int
    ) -> None:
        """Replace a mower if still at ``expected_version``, with its event."""
        reg = record.registration
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                # The row lock is taken before the event's row gets its seq: events of one
                # mower are numbered in the order their changes commit.
                status = await conn.execute(
                    "UPDATE fleet_mowers SET name = $2, connection_kind = $3,"
                    " connection_options = $4, version = $5, updated_at = $6,"
                    " endpoint_key = $8, unlinkable = false, site_id = $9"
                    " WHERE mower_id = $1 AND version = $7",
                    reg.mower_id,
                    reg.name,
                    reg.connection.kind,
                    msgspec.json.encode(reg.connection.options).decode(),
                    record.version,
                    record.updated_at,
                    expected_version,
                    record.endpoint_key,
                    reg.site_id,
                )
                if status.endswith(" 0"):
                    raise VersionConflictError(f"mower {reg.mower_id} changed meanwhile")
                await conn.execute(_EVENT_INSERT, *_event_args(event))
        except asyncpg.ForeignKeyViolationError as err:
            raise _no_site(reg.site_id) from err
        except asyncpg.UniqueViolationError as err:
            if _taken(err):
                raise EndpointTakenError from err
            raise RepositoryUnavailableError(f"registry: {err}") from err
        except (asyncpg.PostgresError, OSError) as err:
            raise failed("registry", err) from err

    async def remove(
        self, mower_id: uuid.UUID, event: RegistryEvent, expected_version: int
    ) -> None:
        """Delete a mower if still at ``expected_version``, with its event."""
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                version = await conn.fetchval(
                    "DELETE FROM fleet_mowers WHERE mower_id = $1 RETURNING version", mower_id
                )
                if version is None:
                    raise MowerNotFoundError(f"mower {mower_id} is not registered")
                if version != expected_version:
                    raise VersionConflictError(f"mower {mower_id} changed meanwhile")
                await conn.execute(_EVENT_INSERT, *_event_args(event))
        except (asyncpg.PostgresError, OSError) as err:
            raise failed("registry", err) from err

    async def assign_endpoint_keys(
        self,
        key_of: Callable[[Connection], str | None],
        event_of: Callable[[MowerRegistration], RegistryEvent],
    ) -> list[EndpointClash]:
        """Give mowers stored without an endpoint key theirs, earliest first, in one
        transaction under a lock the replicas share."""
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock($1)", _KEYS_LOCK)
                rows = await conn.fetch(
                    f"SELECT {_COLUMNS}, unlinkable FROM fleet_mowers"  # noqa: S608 - constant columns
                    " WHERE endpoint_key IS NULL ORDER BY created_at, mower_id"
                )
                keyed = [
                    (row, key)
                    for row in rows
                    if (key := key_of(_record(row).registration.connection)) is not None
                ]
                holders: dict[str, uuid.UUID] = {
                    r["endpoint_key"]: r["mower_id"]
                    for r in await conn.fetch(
                        "SELECT endpoint_key, mower_id FROM fleet_mowers"
                        " WHERE endpoint_key = ANY($1::text[])",
                        [key for _, key in keyed],
                    )
                }
                assigned: list[tuple[uuid.UUID, str]] = []
                clashes: list[EndpointClash] = []
                for row, key in keyed:
                    holder = holders.setdefault(key, row["mower_id"])
                    if holder == row["mower_id"]:
                        assigned.append((holder, key))
                        if row["unlinkable"]:  # linkable again: the gateways learn of it
                            event = event_of(_record(row).registration)
                            await conn.execute(_EVENT_INSERT, *_event_args(event))
                    else:
                        clashes.append(EndpointClash(row["mower_id"], holder))
                await conn.execute(
                    "UPDATE fleet_mowers m SET endpoint_key = a.key, unlinkable = false"
                    " FROM unnest($1::uuid[], $2::text[]) AS a(mower_id, key)"
                    " WHERE m.mower_id = a.mower_id",
                    [mower_id for mower_id, _ in assigned],
                    [key for _, key in assigned],
                )
                await conn.execute(
                    "UPDATE fleet_mowers SET unlinkable = true WHERE mower_id = ANY($1::uuid[])",
                    [clash.mower_id for clash in clashes],
                )
        except (asyncpg.PostgresError, OSError) as err:
            raise RepositoryUnavailableError(f"registry: {err}") from err
        return clashes

    @asynccontextmanager
    async def claim_unpublished(self, limit: int) -> AsyncIterator[RelayClaim | None]:
        """Claim unpublished events in seq order under the relay lock (None when busy)."""
        try:
            conn = await self._pool.acquire()
        except (asyncpg.PostgresError, OSError) as err:
            raise RepositoryUnavailableError(f"unpublished events: {err}") from err
        try:
            async with conn.transaction():
                if not await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", _RELAY_LOCK):
                    yield None
                    return
                rows = await conn.fetch(
                    "SELECT event_id, subject, body, created_at FROM fleet_outbox"
                    " WHERE published_at IS NULL AND failed_at IS NULL"
                    " ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED",
                    limit,
                )
                claim = RelayClaim(
                    [
                        RegistryEvent(
                            r["event_id"], r["subject"], bytes(r["body"]), r["created_at"]
                        )
                        for r in rows
                    ]
                )
                yield claim
                if claim.published:
                    await conn.execute(
                        "UPDATE fleet_outbox SET published_at = now()"
                        " WHERE event_id = ANY($1::uuid[])",
                        claim.published,
                    )
                if claim.failed:
                    await conn.execute(
                        "UPDATE fleet_outbox SET failed_at = now(), error = f.error"
                        " FROM unnest($1::uuid[], $2::text[]) AS f(event_id, error)"
                        " WHERE fleet_outbox.event_id = f.event_id",
                        list(claim.failed),
                        list(claim.failed.values()),
                    )
        except (asyncpg.PostgresError, OSError) as err:
            raise RepositoryUnavailableError(f"unpublished events: {err}") from err
        finally:
            await self._pool.release(conn)

    async def relay_stats(self) -> RelayStats:
        """Events owed, the oldest one's time, and events set aside."""
        rows = await self._fetch(
            "SELECT count(*) FILTER (WHERE failed_at IS NULL) AS n,"
            " min(created_at) FILTER (WHERE failed_at IS NULL) AS oldest,"
            " count(*) FILTER (WHERE failed_at IS NOT NULL) AS failed"
            " FROM fleet_outbox WHERE published_at IS NULL"
        )
        return RelayStats(rows[0]["n"], rows[0]["oldest"], rows[0]["failed"])

    async def _fetch(self, query: str, *args: Any) -> list[asyncpg.Record]:
        try:
            rows: list[asyncpg.Record] = await self._pool.fetch(query, *args)
        except (asyncpg.PostgresError, OSError) as err:
            raise failed("registry", err) from err
        return rows


class PostgresPruning:
    """``Pruning`` on Fleet's tables: batched deletes as a ``LockedRound``."""

    _PUBLISHED_EVENTS = BatchedDelete("fleet_outbox", "published_at", key="seq")
    _STATUSES = BatchedDelete("fleet_command_statuses", "at")
    _COMMANDS = BatchedDelete("fleet_commands", "issued_at", key="command_id")
    # Settled by the finalizer long before; only a finalizer that never ran leaves any.
    _OPEN = BatchedDelete("fleet_open_commands", "expires_at", key="command_id")
    _AUDIT_STATUSES = BatchedDelete("fleet_audit_statuses", "at")
    _AUDIT_COMMANDS = BatchedDelete("fleet_audit_commands", "issued_at", key="command_id")

    def __init__(self, pool: asyncpg.Pool, *, maintenance_timeout_ms: int | None = None) -> None:
        # The round's connection is a new one made like the pool's, never a pooled one,
        # with the longer statement timeout of housekeeping (None: the pool's).
        self._round = LockedRound(
            _PRUNE_LOCK, lambda: connection_like(pool), statement_timeout_ms=maintenance_timeout_ms
        )

    async def prune(self, cutoffs: PruneCutoffs, batch_rows: int) -> dict[str, int] | None:
        """Delete in committed batches; None when another replica holds the lock."""
        deletes = [
            (self._PUBLISHED_EVENTS, cutoffs.published_events),
            (self._STATUSES, cutoffs.commands),
            (self._COMMANDS, cutoffs.commands),
            (self._OPEN, cutoffs.commands),
        ]
        if cutoffs.audit is not None:
            deletes += [
                (self._AUDIT_STATUSES, cutoffs.audit),
                (self._AUDIT_COMMANDS, cutoffs.audit),
            ]

        async def round_(conn: asyncpg.Connection) -> dict[str, int]:
            # The audit tables refuse deletes but the retention round's (0004_audit.sql);
            # the setting lives and dies with this connection of the round's own.
            await conn.execute("SET mowdeck.audit_retention = 'on'")
            deleted: dict[str, int] = {}
            for delete, cutoff in deletes:
                count = await delete_in_batches(conn, delete.statement(), cutoff, batch_rows)
                deleted[delete.table] = deleted.get(delete.table, 0) + count
            return deleted

        try:
            return await self._round.run(round_)
        except (asyncpg.PostgresError, OSError) as err:
            raise RepositoryUnavailableError(f"pruning: {err}") from err


# What the site store (``fleet/sites/postgres.py``) shares with the registry's: the mower
# row as a record, and the event table.
MOWER_COLUMNS = _COLUMNS
EVENT_INSERT = _EVENT_INSERT
event_args = _event_args
mower_record = _record
