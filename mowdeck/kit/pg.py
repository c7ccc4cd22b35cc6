"""Small PostgreSQL helpers shared by the stores."""

from __future__ import annotations

from typing import Any

import asyncpg

__all__ = ["delete_in_batches", "keep_session", "rows_affected"]


async def keep_session(_: asyncpg.Connection) -> None:
    """A pool's ``reset``: release a connection without asyncpg's reset query.

    asyncpg sends ``SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL``
    on every release, a round trip (and a wake-up of the server's backend) per
    transaction; it still rolls back a transaction left open without this. For a pool on
    which nothing changes session state: no ``SET``, ``LISTEN``, ``WITH HOLD`` cursors or
    session advisory locks (``kit.locked_round`` takes its lock on a connection of its
    own; transaction-level locks end with their transaction). Settings given at connect
    (``server_settings``) are the session's defaults either way.
    """


def rows_affected(status: str) -> int:
    """Rows a statement touched, from asyncpg's command tag ("INSERT 0 17", "DELETE 5")."""
    return int(status.rsplit(" ", 1)[-1])


async def delete_in_batches(
    conn: asyncpg.Connection, statement: str, cutoff: Any, batch_rows: int
) -> int:
    """Run ``statement`` (``$1`` the cutoff, ``$2`` the batch size) until a batch comes
    back short; every batch is its own short transaction. Returns the rows deleted."""
    deleted = 0
    while True:
        count = rows_affected(await conn.execute(statement, cutoff, batch_rows))
        deleted += count
        if count < batch_rows:
            return deleted
