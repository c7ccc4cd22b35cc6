"""The PostgreSQL store: batched ``unnest`` writes, guarded latest rows, date_bin history."""

from __future__ import annotations

import operator
import uuid
from collections.abc import AsyncIterator, Collection, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import msgspec

from contracts.v1 import MowerState, Position
from mowdeck.kit.locked_round import BatchedDelete, LockedRound
from mowdeck.kit.pg import QUERY_CANCELED, rows_affected, session_settings
from mowdeck.telemetry import sql
from mowdeck.telemetry.errors import (
    StoreConflictError,
    StoreError,
    StoreRejectedError,
    StoreTimeoutError,
)
from mowdeck.telemetry.model import (
    HistoryBin,
    HistoryRow,
    Memory,
    PositionRow,
    TimelineRow,
    TrackPoint,
)
from mowdeck.telemetry.ports import Cutoffs, WriteBatch, WriteCounts

__all__ = ["PostgresTelemetryStore", "create_pool", "pool_options"]

_RETENTION_LOCK = 0x74656C65  # "tele"
_HISTORY = BatchedDelete("mower_history", "observed_at")
_POSITIONS = BatchedDelete("mower_positions", "observed_at")
_TIMELINE = BatchedDelete("command_timeline", "at")
_TOMBSTONES = BatchedDelete("mower_directory", "removed_at")
# The SQLSTATE class of data exceptions: the values themselves were refused.
_DATA_EXCEPTION = "22"
_raw = msgspec.json.Encoder()
_decode_raw = msgspec.json.Decoder(dict[str, Any])


def pool_options(max_size: int, *, statement_timeout_ms: int) -> dict[str, Any]:
    """Pool options whose sessions run in UTC with the statement timeout (``kit.pg``)."""
    return {
        "min_size": 1,
        "max_size": max_size,
        "server_settings": session_settings(statement_timeout_ms),
    }


async def create_pool(dsn: str, *, max_size: int, statement_timeout_ms: int = 0) -> asyncpg.Pool:
    """A pool with ``pool_options``."""
    options = pool_options(max_size, statement_timeout_ms=statement_timeout_ms)
    pool: asyncpg.Pool = await asyncpg.create_pool(dsn, **options)
    return pool


# deadlock_detected, serialization_failure: the transaction was rolled back for another's
# sake. Two replicas meeting new mowers can deadlock: row locks are taken in one order, but
# only on rows that exist, and a row another transaction inserts meanwhile is locked later.
_CONFLICTS = frozenset({"40P01", "40001"})


def _refused(err: Exception) -> bool:
    # asyncpg raises DataError for class 22 and for arguments it cannot encode; a class 22
    # code it does not know yet comes as UnknownPostgresError with the code.
    sqlstate = getattr(err, "sqlstate", None) or ""
    return isinstance(err, asyncpg.DataError) or sqlstate.startswith(_DATA_EXCEPTION)


@contextmanager
def _translated(operation: str) -> Iterator[None]:
    """asyncpg's errors as ``StoreRejectedError`` (the data) or ``StoreError`` (the rest)."""
    try:
        yield
    except (asyncpg.PostgresError, asyncpg.InterfaceError) as err:
        if _refused(err):
            raise StoreRejectedError(f"{operation} refused: {err}") from err
        if getattr(err, "sqlstate", None) in _CONFLICTS:
            raise StoreConflictError(f"{operation} lost a race: {err}") from err
        if getattr(err, "sqlstate", None) == QUERY_CANCELED:
            raise StoreTimeoutError(f"{operation} ran out of time: {err}") from err
        raise StoreError(f"{operation} failed: {err}") from err


def _memory(row: asyncpg.Record) -> Memory:
    # Unpacked in the order of ``sql._MEMORY``: cheaper than a lookup by name per column,
    # and this runs for every mower of every ingest batch.
    _, account_id, observed_at, history_at, state_fp, track_lat, track_lon, track_fix = row
    return Memory(
        account_id=account_id,
        observed_at=observed_at,
        history_at=history_at,
        state_fp=state_fp,
        track=None if track_lat is None else TrackPoint(track_lat, track_lon, track_fix),
    )


def _state(row: asyncpg.Record) -> MowerState:
    position = None
    if row["lat"] is not None:
        position = {"lat": row["lat"], "lon": row["lon"], "heading_deg": row["heading_deg"]}
    fields = {k: row[k] for k in sql.STATE_COLUMNS}
    fields["raw"] = _decode_raw.decode(row["raw"])
    return msgspec.convert({**fields, "position": position}, MowerState)


class PostgresTelemetryStore:
    """Telemetry tables in PostgreSQL through an asyncpg pool.

    Retention opens a dedicated autocommit connection to ``dsn`` per round, so the
    session-level advisory lock never leaks into a pooled connection; its statements get
    ``maintenance_timeout_ms`` (None: the server's default).
    """

    def __init__(
        self, pool: asyncpg.Pool, dsn: str, *, maintenance_timeout_ms: int | None = None
    ) -> None:
        self._pool = pool
        self._retention = LockedRound(
            _RETENTION_LOCK,
            lambda: asyncpg.connect(dsn, server_settings={"timezone": "UTC"}),
            statement_timeout_ms=maintenance_timeout_ms,
        )

    # -- ingest --------------------------------------------------------------------

    @asynccontextmanager
    async def state_writer(self) -> AsyncIterator[_Writer]:
        """One transaction for an ingest batch."""
        with _translated("ingest batch"):
            async with self._pool.acquire() as conn, conn.transaction():
                yield _Writer(conn)

    async def memories(self, mower_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Memory]:
        """The stored memories of ``mower_ids``."""
        rows = await self._pool.fetch(sql.MEMORIES, list(mower_ids))
        return {row["mower_id"]: _memory(row) for row in rows}

    # -- directory -----------------------------------------------------------------

    async def directory_account(self, mower_id: uuid.UUID) -> uuid.UUID | None:
        """The account of a known, not removed mower."""
        account: uuid.UUID | None = await self._pool.fetchval(sql.DIRECTORY_ONE, mower_id)
        return account

    async def seed_directory(self, entries: Sequence[tuple[uuid.UUID, uuid.UUID]]) -> int:
        """Add pairs no event has spoken about (events win)."""
        if not entries:
            return 0
        with _translated("directory seed"):
            status = await self._pool.execute(
                sql.SEED, [m for m, _ in entries], [a for _, a in entries]
            )
        return rows_affected(status)

    async def register_mower(
        self, mower_id: uuid.UUID, account_id: uuid.UUID, occurred_at: datetime
    ) -> bool:
        """Apply a registration unless a newer event was applied.

        An id registered again after its removal starts clean: rows a late state of the
        removed mower wrote after the purge (its last batch, a redelivery) are purged
        too, or they would hold the new registration's states off as another account's.
        """
        async with self._pool.acquire() as conn, conn.transaction():
            removed_at = await conn.fetchval(sql.DIRECTORY_FOR_UPDATE, mower_id)
            status = await conn.execute(sql.REGISTER, mower_id, account_id, occurred_at)
            if rows_affected(status) != 1:
                return False
            if removed_at is not None:
                for statement in sql.PURGE:
                    await conn.execute(statement, mower_id)
        return True

    async def remove_mower(self, mower_id: uuid.UUID, occurred_at: datetime) -> int:
        """Tombstone the mower and purge it, in one transaction, unless a newer event won.

        A removal that arrives after the id was registered again (redelivered, or taken
        late by another replica) must not purge the new registration's rows: the
        tombstone's guard decides, and its row lock holds off a registration meanwhile.
        """
        deleted = 0
        async with self._pool.acquire() as conn, conn.transaction():
            status = await conn.execute(sql.TOMBSTONE, mower_id, occurred_at)
            if rows_affected(status) == 0:
                return 0
            for statement in sql.PURGE:
                deleted += rows_affected(await conn.execute(statement, mower_id))
        return deleted

    async def add_timeline(self, row: TimelineRow) -> bool:
        """Store a status transition once."""
        with _translated("timeline row"):
            status = await self._pool.execute(
                sql.TIMELINE_INSERT,
                row.command_id,
                row.status,
                row.mower_id,
                row.account_id,
                row.at,
                row.reason,
                row.kind,
            )
        return rows_affected(status) == 1

    # -- queries -------------------------------------------------------------------

    async def latest(self, account_id: uuid.UUID, mower_id: uuid.UUID) -> MowerState | None:
        """The latest state of one of the account's mowers."""
        with _translated("latest state read"):
            row = await self._pool.fetchrow(sql.LATEST_ONE, account_id, mower_id)
        return None if row is None else _state(row)

    async def latest_of_account(
        self,
        account_id: uuid.UUID,
        mower_ids: Collection[uuid.UUID] | None,
        *,
        after: uuid.UUID | None = None,
        limit: int | None = None,
    ) -> list[MowerState]:
        """The account's latest states, optionally of ``mower_ids`` only, behind ``after``."""
        args: list[Any] = [account_id, limit]
        if mower_ids is None:
            query = sql.LATEST_ACCOUNT if after is None else sql.LATEST_ACCOUNT_AFTER
        else:
            query = sql.LATEST_SOME if after is None else sql.LATEST_SOME_AFTER
            args.append(list(mower_ids))
        if after is not None:
            args.append(after)
        with _translated("latest states read"):
            rows = await self._pool.fetch(query, *args)
        return [_state(row) for row in rows]

    async def history(
        self,
        account_id: uuid.UUID,
        mower_id: uuid.UUID,
        start: datetime,
        end: datetime,
        limit: int,
    ) -> list[HistoryRow]:
        """History rows in ``[start, end)``."""
        with _translated("history read"):
            rows = await self._pool.fetch(sql.HISTORY, account_id, mower_id, start, end, limit)
        return [HistoryRow(**dict(row)) for row in rows]

    async def history_bins(
        self,
        account_id: uuid.UUID,
        mower_id: uuid.UUID,
        start: datetime,
        end: datetime,
        step: timedelta,
    ) -> list[HistoryBin]:
        """History downsampled with ``date_bin`` in the database."""
        with _translated("history bins read"):
            rows = await self._pool.fetch(sql.HISTORY_BINS, account_id, mower_id, start, end, step)
        # Built directly rather than through ``msgspec.convert`` of a dict per row: a month
        # at one hour is 744 bins, and this is the hot part of the route in Python.
        return [
            HistoryBin(
                bin=row[0],
                activity=row[1],
                rtk_fix=row[2],
                error_code=row[3],
                battery=row[4],
                battery_min=row[5],
                battery_max=row[6],
                charging=row[7],
                samples=row[8],
                position=None
                if row[9] is None
                else Position(lat=row[9], lon=row[10], heading_deg=row[11]),
            )
            for row in rows
        ]

    async def track(
        self,
        account_id: uuid.UUID,
        mower_id: uuid.UUID,
        start: datetime,
        end: datetime,
        limit: int,
    ) -> list[PositionRow]:
        """Track points in ``[start, end)``."""
        with _translated("track read"):
            rows = await self._pool.fetch(sql.TRACK, account_id, mower_id, start, end, limit)
        return [PositionRow(**dict(row)) for row in rows]

    async def timeline(
        self,
        account_id: uuid.UUID,
        mower_id: uuid.UUID,
        start: datetime,
        end: datetime,
        limit: int,
    ) -> list[TimelineRow]:
        """Status transitions in ``[start, end)``."""
        with _translated("timeline read"):
            rows = await self._pool.fetch(sql.TIMELINE, account_id, mower_id, start, end, limit)
        return [TimelineRow(**dict(row)) for row in rows]

    # -- retention -----------------------------------------------------------------

    async def retention_round(self, cutoffs: Cutoffs, batch_rows: int) -> dict[str, int] | None:
        """Delete old rows in batches under an advisory lock; None if another replica has it."""
        return await self._retention.delete(
            (
                (_HISTORY, cutoffs.history),
                (_POSITIONS, cutoffs.positions),
                (_TIMELINE, cutoffs.timeline),
                # Only tombstones have a removed_at; live entries are never touched.
                (_TOMBSTONES, cutoffs.tombstones),
            ),
            batch_rows,
        )


_uuid_int = operator.attrgetter("int")


def _latest_order(row: tuple[MowerState, Memory]) -> int:
    return row[0].mower_id.int


class _Writer:
    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn

    async def lock(
        self, mower_ids: Sequence[uuid.UUID]
    ) -> tuple[dict[uuid.UUID, Memory], dict[uuid.UUID, uuid.UUID]]:
        # One lock order for every replica: no deadlocks. Sorted by the ints (the same
        # order): a UUID's ``__lt__`` is a Python call per comparison.
        ids = sorted(mower_ids, key=_uuid_int)
        rows = await self._conn.fetch(sql.LOCK_LATEST, ids)
        directory = await self._conn.fetch(sql.DIRECTORY_MANY, ids)
        return (
            {row["mower_id"]: _memory(row) for row in rows},
            {row["mower_id"]: row["account_id"] for row in directory},
        )

    async def write(self, batch: WriteBatch) -> WriteCounts:
        conn = self._conn
        latest = history = positions = 0
        if batch.latest:
            rows = sorted(batch.latest, key=_latest_order)
            latest = rows_affected(await conn.execute(sql.UPSERT_LATEST, *sql.latest_columns(rows)))
        if batch.history:
            history = rows_affected(
                await conn.execute(sql.INSERT_HISTORY, *sql.history_columns(batch.history))
            )
        if batch.positions:
            positions = rows_affected(
                await conn.execute(sql.INSERT_POSITIONS, *sql.position_columns(batch.positions))
            )
        if batch.reassert:
            history += rows_affected(await conn.execute(sql.REASSERT_HISTORY, batch.reassert))
        return WriteCounts(latest, history, positions)
