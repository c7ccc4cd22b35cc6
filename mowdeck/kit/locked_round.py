"""A housekeeping round that one replica at a time runs, under a PostgreSQL advisory lock.

Every replica tries the round on its timer; the one that gets ``pg_try_advisory_lock``
runs it, the others skip. The lock is a session lock (it spans many committed batches),
so the round runs on one autocommit connection of its own, opened for the round and
closed after it (ADR 0017): the lock can never stay behind in a pooled connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import asyncpg
import structlog

from mowdeck.kit.pg import delete_in_batches, set_statement_timeout

__all__ = ["BatchedDelete", "LockedRound", "connection_like"]

log = structlog.get_logger("mowdeck.locked_round")
T = TypeVar("T")
Connect = Callable[[], Awaitable[asyncpg.Connection]]
_CLOSE_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class BatchedDelete:
    """Rows of ``table`` whose ``column`` is older than a cutoff, picked by ``key``."""

    table: str
    column: str
    # What the sub-select picks: the primary key where there is a short one, else ctid.
    key: str = "ctid"

    def statement(self) -> str:
        """The delete of at most ``$2`` rows older than ``$1``."""
        t, c, k = self.table, self.column, self.key
        return f"DELETE FROM {t} WHERE {k} IN (SELECT {k} FROM {t} WHERE {c} < $1 LIMIT $2)"  # noqa: S608 - names are the code's own, values are parameters


class LockedRound:
    """Runs work under the session advisory lock ``key`` on a connection of its own.

    ``statement_timeout_ms`` (when given) is the round's own statement timeout: a
    housekeeping round may legitimately run statements longer than the service's pool
    allows (``MOWDECK_DATABASE_MAINTENANCE_STATEMENT_TIMEOUT_MS``).
    """

    def __init__(
        self, key: int, connect: Connect, *, statement_timeout_ms: int | None = None
    ) -> None:
        self.key = key
        self._connect = connect
        self._timeout_ms = statement_timeout_ms

    async def run(self, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T | None:
        """``work(conn)`` under the lock; None, without running it, if another holds it."""
        conn = await self._connect()
        try:
            if self._timeout_ms is not None:
                await set_statement_timeout(conn, self._timeout_ms)
            if not await conn.fetchval("SELECT pg_try_advisory_lock($1)", self.key):
                return None
            try:
                return await work(conn)
            finally:
                await self._unlock(conn)
        finally:
            await _close(conn)

    async def delete(
        self, deletes: Sequence[tuple[BatchedDelete, Any]], batch_rows: int
    ) -> dict[str, int] | None:
        """Each delete with its cutoff, in batches of ``batch_rows`` until one comes back
        short; rows deleted per table, or None if another replica holds the lock."""

        async def round_(conn: asyncpg.Connection) -> dict[str, int]:
            deleted: dict[str, int] = {}
            for delete, cutoff in deletes:
                count = await delete_in_batches(conn, delete.statement(), cutoff, batch_rows)
                deleted[delete.table] = deleted.get(delete.table, 0) + count
            return deleted

        return await self.run(round_)

    async def _unlock(self, conn: asyncpg.Connection) -> None:
        # Unlocking fails when the round was cancelled mid-statement or the connection
        # broke: ending the session releases the lock just as well. What the round
        # committed stands, so its result (or its own error) is what the caller sees;
        # only a cancellation goes on.
        try:
            await conn.execute("SELECT pg_advisory_unlock($1)", self.key)
        except Exception as err:
            log.warning("advisory unlock failed; connection closed", lock=self.key, error=str(err))
            conn.terminate()
        except BaseException:
            conn.terminate()
            raise


async def _close(conn: asyncpg.Connection) -> None:
    if conn.is_closed():
        return
    try:
        await conn.close(timeout=_CLOSE_TIMEOUT_S)
    except BaseException:
        conn.terminate()
        raise


async def connection_like(pool: asyncpg.Pool) -> asyncpg.Connection:
    """A new connection, not one of the pool's, made as the pool makes its own."""
    # asyncpg keeps what ``create_pool`` was given (the DSN and connect options) but has no
    # public getter for it. Going through it keeps the round on the pool's database
    # whoever created the pool, without handing a DSN down beside it.
    args: tuple[Any, ...] = pool._connect_args
    kwargs: dict[str, Any] = pool._connect_kwargs
    conn: asyncpg.Connection = await asyncpg.connect(*args, **kwargs)
    return conn
