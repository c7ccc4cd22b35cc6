"""Latest states of mowers the TELEMETRY stream no longer holds, from Telemetry's read model.

A port with its adapters: Telemetry's ``mower_latest`` table read with Realtime's own
statement (the mowers are the caller's visible ones already, so it serves every stream;
the columns read are declared in docs/telemetry.md as Realtime's read dependency), an
in-memory one and none. Telemetry's ``GET /v1/states`` was an adapter too: it answered
only streams with a bearer token to forward (not a ticket stream, so not a browser's) and
took 4 to 20 times as long (docs/performance.md, "`realtime_fallback`").
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable
from typing import Protocol

import asyncpg
import msgspec
import structlog

from contracts.v1 import MowerState
from mowdeck.realtime.errors import StatesUnavailableError

__all__ = [
    "LatestStates",
    "MemoryLatestStates",
    "NoLatestStates",
    "PostgresLatestStates",
]

log = structlog.get_logger("mowdeck.realtime.stale")


class LatestStates(Protocol):
    """Telemetry's latest states, asked for the mowers a snapshot found no message for."""

    async def latest(
        self, mowers: Collection[uuid.UUID], *, account_id: uuid.UUID
    ) -> list[MowerState]:
        """The latest known states of ``mowers`` (those it has)."""
        ...


# Telemetry's table, read as docs/telemetry.md declares (Realtime's read dependency): only
# these columns, only by the primary key and the account (its index).
_LATEST = (
    "SELECT mower_id, account_id, observed_at, activity, battery, charging, rtk_fix,"
    " rtk_source, connection, blade_height_mm, speed_mps, error_code, lat, lon, heading_deg,"
    " raw::text AS raw"
    " FROM mower_latest WHERE account_id = $1 AND mower_id = ANY($2::uuid[])"
)
_COLUMNS = (
    "mower_id",
    "account_id",
    "observed_at",
    "activity",
    "battery",
    "charging",
    "rtk_fix",
    "rtk_source",
    "connection",
    "blade_height_mm",
    "speed_mps",
    "error_code",
)
_raw = msgspec.json.Decoder(dict[str, object])


def _state(row: asyncpg.Record) -> MowerState:
    fields: dict[str, object] = {name: row[name] for name in _COLUMNS}
    if row["lat"] is not None:
        fields["position"] = {
            "lat": row["lat"],
            "lon": row["lon"],
            "heading_deg": row["heading_deg"],
        }
    fields["raw"] = _raw.decode(row["raw"])
    return msgspec.convert(fields, MowerState)


class PostgresLatestStates(LatestStates):
    """Telemetry's ``mower_latest`` rows, read with Realtime's own statement."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def latest(
        self, mowers: Collection[uuid.UUID], *, account_id: uuid.UUID
    ) -> list[MowerState]:
        """The account's latest rows of ``mowers``."""
        if not mowers:
            return []
        try:
            rows = await self._pool.fetch(_LATEST, account_id, list(mowers))
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as err:
            raise StatesUnavailableError(f"telemetry's table cannot be read: {err!r}") from err
        states: list[MowerState] = []
        for row in rows:
            try:
                states.append(_state(row))
            except (msgspec.ValidationError, msgspec.DecodeError) as err:
                # Telemetry stored what it validated: a row that is no state is one mower's
                # problem (a column changed under Realtime), not the snapshot's.
                log.warning("telemetry row skipped", mower_id=str(row["mower_id"]), error=str(err))
        return states


class MemoryLatestStates(LatestStates):
    """States kept in a dict (tests, and processes without Telemetry)."""

    def __init__(self, states: Iterable[MowerState] = ()) -> None:
        self.states = {s.mower_id: s for s in states}

    async def latest(
        self, mowers: Collection[uuid.UUID], *, account_id: uuid.UUID
    ) -> list[MowerState]:
        """The known states of ``mowers`` in the account."""
        found = (self.states.get(m) for m in mowers)
        return [s for s in found if s is not None and s.account_id == account_id]


class NoLatestStates(LatestStates):
    """No fallback: a snapshot has only what the stream holds."""

    async def latest(
        self, mowers: Collection[uuid.UUID], *, account_id: uuid.UUID
    ) -> list[MowerState]:
        """Nothing."""
        del mowers, account_id
        return []
