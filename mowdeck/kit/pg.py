"""Small PostgreSQL helpers shared by the stores."""

from __future__ import annotations

from typing import Any

import asyncpg

__all__ = [
    "QUERY_CANCELED",
    "delete_in_batches",
    "keep_session",
    "rows_affected",
    "session_settings",
    "set_statement_timeout",
]


QUERY_CANCELED = "57014"
"""The SQLSTATE of a statement PostgreSQL cancelled: its statement timeout, mostly."""


def session_settings(statement_timeout_ms: int) -> dict[str, str]:
    """The server settings of a service's sessions (``server_settings`` at connect): UTC,
    whatever the server's or database's default, and the statement timeout (0: none).

    The timeout is PostgreSQL's own, so it holds whatever the client does: a query whose
    caller went away, or whose cancellation never reached the server, still ends.
    """
    return {"timezone": "UTC", "statement_timeout": str(statement_timeout_ms)}


async def set_statement_timeout(conn: asyncpg.Connection, statement_timeout_ms: int) -> None:
    """Give the session of ``conn`` its own statement timeout (0: none)."""
    # SET takes no parameters; the value is an int, never text from outside.
    await conn.execute(f"SET statement_timeout = {int(statement_timeout_ms)}")


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
