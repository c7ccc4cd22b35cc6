"""Erasure: a user's or a mower's rows in every part, deleted in one transaction.

``identity.user.disabled`` and ``.deleted`` take the user's preferences, inbox, targets
and deliveries; ``mower.removed`` takes the mower's watch, pending events, inbox items,
deliveries and its place in every selection (ADR 0022). Each part's store deletes its
own rows (``delete_user_rows``, ``delete_mower_rows``); the erasure runs them in one
transaction, in the order given, so nothing of a user or a mower is left half gone.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Protocol

import asyncpg

from mowdeck.notifications.inbox.ports import Erasure
from mowdeck.notifications.pg import translated

__all__ = ["InMemoryErasure", "MemoryRows", "PostgresErasure", "PostgresRows"]


class PostgresRows(Protocol):
    """A part's PostgreSQL store: its rows of a user or a mower, deleted on ``conn``."""

    async def delete_user_rows(self, conn: asyncpg.Connection, user_id: str, /) -> int:
        """Delete the part's rows of the user; the count."""
        ...

    async def delete_mower_rows(self, conn: asyncpg.Connection, mower_id: uuid.UUID, /) -> int:
        """Delete the part's rows of the mower; the count."""
        ...


class MemoryRows(Protocol):
    """A part's in-memory store: its rows of a user or a mower, deleted at once."""

    def delete_user_rows(self, user_id: str, /) -> int:
        """Delete the part's rows of the user; the count."""
        ...

    def delete_mower_rows(self, mower_id: uuid.UUID, /) -> int:
        """Delete the part's rows of the mower; the count."""
        ...


class PostgresErasure(Erasure):
    """Every part's rows in one transaction of the pool's."""

    def __init__(self, pool: asyncpg.Pool, parts: Sequence[PostgresRows]) -> None:
        self._pool = pool
        self._parts = tuple(parts)

    async def delete_user(self, user_id: str) -> int:
        """Delete the user's rows in every part."""
        deleted = 0
        with translated("user deletion"):
            async with self._pool.acquire() as conn, conn.transaction():
                for part in self._parts:
                    deleted += await part.delete_user_rows(conn, user_id)
        return deleted

    async def forget_mower(self, mower_id: uuid.UUID) -> int:
        """Delete the mower's rows in every part."""
        deleted = 0
        with translated("mower removal"):
            async with self._pool.acquire() as conn, conn.transaction():
                for part in self._parts:
                    deleted += await part.delete_mower_rows(conn, mower_id)
        return deleted


class InMemoryErasure(Erasure):
    """Every part's rows, with nothing awaited in between."""

    def __init__(self, parts: Sequence[MemoryRows]) -> None:
        self._parts = tuple(parts)

    async def delete_user(self, user_id: str) -> int:
        """Delete the user's rows in every part."""
        return sum(part.delete_user_rows(user_id) for part in self._parts)

    async def forget_mower(self, mower_id: uuid.UUID) -> int:
        """Delete the mower's rows in every part."""
        return sum(part.delete_mower_rows(mower_id) for part in self._parts)
