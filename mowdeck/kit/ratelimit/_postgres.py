"""Token buckets in a PostgreSQL table shared by every replica: one statement per write.

A write is one ``INSERT ... ON CONFLICT DO UPDATE ... RETURNING`` of ``count`` takes: a
new key gets a full bucket less the tokens taken; an existing row is refilled and drawn
down by as many whole tokens as there are (up to ``count``), under the row's lock, so
concurrent writes of one key queue on that row and each sees the one before. The
arithmetic is ``_bucket.take_many`` written in SQL (the contract tests hold the two
together). ``granted`` records how many of the write's takes passed, which the new row
alone would not tell (a bucket at 0.5 may have just given a token or refused one).

The table (a service's migration creates it, see ``TABLE_SQL``) is best ``UNLOGGED``:
buckets are worth nothing after a crash (all of them full again is the right answer to
a lost table), and no write-ahead log is written per take.
"""

from __future__ import annotations

import asyncio
import re

import asyncpg

from mowdeck.kit.ratelimit._bucket import ALLOWED, EPSILON, Limit, Verdict, refused
from mowdeck.kit.ratelimit._ports import LimiterUnavailableError, TokenStore

__all__ = ["TABLE_SQL", "PostgresLimiter"]

TABLE_SQL = """
CREATE UNLOGGED TABLE {table} (
    key text PRIMARY KEY,
    tokens double precision NOT NULL,
    at double precision NOT NULL,
    full_at double precision NOT NULL,
    granted integer NOT NULL
) WITH (fillfactor = 50)
"""
"""The table's shape (``at`` and ``full_at`` in seconds since the epoch); a migration
spells it out under its own name."""

_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")

# $1 key, $2 now, $3 burst, $4 rate, $5 count (typed once, here). In SET, columns are the
# row as it was: "refilled" is repeated rather than named, which an upsert cannot do.
_REFILLED = "least({b}, b.tokens + least(greatest({now} - b.at, 0), {b} / {rate}) * {rate})"
_GRANTED = "least({n}, floor({r} + {eps}))"
_TAKE = """
INSERT INTO {table} AS b (key, tokens, at, full_at, granted)
VALUES ($1, {b} - {new}, {now}, {now} + {new} / {rate}, {new})
ON CONFLICT (key) DO UPDATE SET
    tokens = greatest({r} - {g}, 0),
    at = greatest(b.at, {now}),
    full_at = greatest(b.at, {now}) + ({b} - greatest({r} - {g}, 0)) / {rate},
    granted = {g}
RETURNING tokens, granted
"""
# Under READ COMMITTED the condition is checked again on a row that a take changed
# meanwhile, so a bucket drawn down since the scan saw it full is not deleted.
_EXPIRE = "DELETE FROM {table} WHERE full_at <= $1"


def _take_statement(table: str) -> str:
    params = {"now": "$2::float8", "b": "$3::float8", "rate": "$4::float8", "n": "$5::int4"}
    eps = repr(EPSILON)
    refilled = _REFILLED.format(**params)
    granted = _GRANTED.format(r=refilled, eps=eps, **params)
    new = _GRANTED.format(r=params["b"], eps=eps, **params)  # a new key's bucket is full
    return _TAKE.format(table=table, r=refilled, g=granted, new=new, **params)


class PostgresLimiter(TokenStore):
    """Buckets as rows of ``table`` on ``pool``, holding at most ``connections`` of it.

    The bound keeps a slow or locked table from taking every connection of a pool the
    service also needs for its own work (an emergency stop's journal write, say); a
    statement still running after ``statement_timeout`` is cancelled.
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        table: str,
        *,
        connections: int = 2,
        statement_timeout: float = 5.0,
    ) -> None:
        if _NAME.fullmatch(table) is None:
            raise ValueError(f"not a plain table name: {table!r}")
        self._pool = pool
        self._take = _take_statement(table)
        self._expire = _EXPIRE.format(table=table)
        self._connections = asyncio.Semaphore(connections)
        self._timeout = statement_timeout

    async def take(self, key: str, limit: Limit, now: float) -> Verdict:
        """Take one token from ``key``'s row, in one round trip."""
        tokens, granted = await self.take_many(key, limit, now, 1)
        return ALLOWED if granted else refused(tokens, limit)

    async def take_many(self, key: str, limit: Limit, now: float, count: int) -> tuple[float, int]:
        """``count`` takes from ``key``'s row, in one round trip."""
        try:
            async with self._connections:
                row = await self._pool.fetchrow(
                    self._take,
                    key,
                    now,
                    float(limit.burst),
                    float(limit.rate),
                    count,
                    timeout=self._timeout,
                )
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as err:
            raise LimiterUnavailableError(f"rate limit store: {err!r}") from err
        assert row is not None  # an upsert with RETURNING returns its row
        return row["tokens"], row["granted"]

    async def expire(self, now: float) -> int:
        """Delete the rows whose bucket is full again by ``now``."""
        try:
            status = await self._pool.execute(self._expire, now, timeout=self._timeout)
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as err:
            raise LimiterUnavailableError(f"rate limit store: {err!r}") from err
        return int(status.rsplit(" ", 1)[-1])
