"""Small PostgreSQL helpers shared by the stores."""

from __future__ import annotations

from typing import Any

import asyncpg

__all__ = ["delete_in_batches", "rows_affected"]


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
