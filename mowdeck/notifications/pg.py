"""What the parts' PostgreSQL adapters share: the pool's options, errors, a message's columns.

The pool is the composition's (its sessions may run in any time zone: every time column
is ``timestamptz`` and comes back in UTC).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import asyncpg
import msgspec

from mowdeck.kit.pg import keep_session, rows_affected, session_settings
from mowdeck.notifications.errors import StoreConflictError, StoreError, StoreRejectedError
from mowdeck.notifications.rules.events import Param
from mowdeck.notifications.rules.quiet import QuietHours

__all__ = [
    "columns",
    "delete_rows",
    "message_fields",
    "pool_options",
    "quiet_hours",
    "translated",
]

# The SQLSTATE class of data exceptions: the values themselves were refused.
_DATA_EXCEPTION = "22"
# deadlock_detected, serialization_failure: rolled back for another transaction's sake.
_CONFLICTS = frozenset({"40P01", "40001"})
_params = msgspec.json.Decoder(dict[str, Param])


@contextmanager
def translated(operation: str) -> Iterator[None]:
    """asyncpg's errors as ``StoreRejectedError``, ``StoreConflictError`` or ``StoreError``."""
    try:
        yield
    except (asyncpg.PostgresError, asyncpg.InterfaceError) as err:
        sqlstate = getattr(err, "sqlstate", None) or ""
        if isinstance(err, asyncpg.DataError) or sqlstate.startswith(_DATA_EXCEPTION):
            raise StoreRejectedError(f"{operation} refused: {err}") from err
        if sqlstate in _CONFLICTS:
            raise StoreConflictError(f"{operation} lost a race: {err}") from err
        raise StoreError(f"{operation} failed: {err}") from err


async def delete_rows(conn: asyncpg.Connection, statements: Sequence[str], key: object) -> int:
    """Run each of ``statements`` with ``$1`` = ``key`` on ``conn``; the rows deleted."""
    deleted = 0
    for statement in statements:
        deleted += rows_affected(await conn.execute(statement, key))
    return deleted


def columns(row: asyncpg.Record, *names: str) -> dict[str, Any]:
    """The columns ``names`` of ``row``, as fields of a struct of the same names."""
    return {name: row[name] for name in names}


_MESSAGE = ("kind", "mower_id", "severity", "dedupe_key", "message_key", "occurred_at")


def message_fields(row: asyncpg.Record) -> dict[str, Any]:
    """The message of a pending event, an inbox item or a delivery row, as fields of its
    struct: kind, mower, severity, dedupe and message key, parameters, when it occurred."""
    return {**columns(row, *_MESSAGE), "params": _params.decode(row["params"])}


def quiet_hours(row: asyncpg.Record) -> QuietHours | None:
    """The quiet hours of a ``notification_preferences`` row, if it has any."""
    if row["quiet_start"] is None:
        return None
    return QuietHours(
        start=row["quiet_start"], end=row["quiet_end"], allow_critical=row["quiet_allow_critical"]
    )


def pool_options(max_size: int, *, statement_timeout_ms: int) -> dict[str, Any]:
    """Options of Notifications' pool (``asyncpg.create_pool``): sessions in UTC, released
    without asyncpg's reset query (``kit.pg.keep_session``: nothing on this pool changes
    session state; the offline scan and the delivery workers lock rows with ``SKIP
    LOCKED`` inside their transactions, housekeeping locks on a connection of its own)."""
    return {
        "min_size": 1,
        "max_size": max_size,
        "server_settings": session_settings(statement_timeout_ms),
        "reset": keep_session,
    }
