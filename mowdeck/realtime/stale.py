"""Latest states of mowers the TELEMETRY stream no longer holds, from Telemetry's read model.

A port with three adapters: Telemetry's ``mower_latest`` table read with Realtime's own
statement (the mowers are the caller's visible ones already; works for every stream; the
columns read are declared in docs/telemetry.md as Realtime's read dependency), its HTTP
API (``GET /v1/states`` with the caller's own token, so Telemetry scopes the answer exactly
as for the caller; a ticket stream has no token to forward), and an in-memory one.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable
from typing import Protocol

import aiohttp
import asyncpg
import msgspec
import structlog

from contracts.v1 import MowerState
from mowdeck.realtime.errors import StatesUnavailableError

__all__ = [
    "HttpLatestStates",
    "LatestStates",
    "MemoryLatestStates",
    "NoLatestStates",
    "PostgresLatestStates",
]

log = structlog.get_logger("mowdeck.realtime.stale")


class LatestStates(Protocol):
    """Telemetry's latest states, asked for the mowers a snapshot found no message for."""

    async def latest(
        self, mowers: Collection[uuid.UUID], *, account_id: uuid.UUID, token: str | None
    ) -> list[MowerState]:
        """The latest known states of ``mowers`` (those it has)."""
        ...


class _Items(msgspec.Struct):
    items: list[MowerState]


_decoder = msgspec.json.Decoder(_Items)


class HttpLatestStates(LatestStates):
    """Telemetry's ``/v1/states``, asked with the caller's bearer token."""

    def __init__(self, base_url: str, session: aiohttp.ClientSession, timeout: float = 3.0) -> None:
        self._url = base_url.rstrip("/") + "/v1/states"
        self._session = session
        self._timeout = aiohttp.ClientTimeout(total=timeout)

    async def latest(
        self, mowers: Collection[uuid.UUID], *, account_id: uuid.UUID, token: str | None
    ) -> list[MowerState]:
        """The account's states from Telemetry, narrowed to ``mowers``."""
        del account_id  # the token names it, and Telemetry scopes by the token
        if not mowers or token is None:
            return []
        headers = {"Authorization": f"Bearer {token}"}
        try:
            async with self._session.get(
                self._url, headers=headers, timeout=self._timeout
            ) as response:
                if response.status != 200:
                    raise StatesUnavailableError(f"telemetry answered {response.status}")
                body = await response.read()
        except aiohttp.ClientError as err:
            raise StatesUnavailableError(f"telemetry is unreachable: {err}") from err
        except TimeoutError as err:
            raise StatesUnavailableError("telemetry did not answer in time") from err
        try:
            items = _decoder.decode(body).items
        except msgspec.DecodeError as err:
            raise StatesUnavailableError(f"telemetry's answer is malformed: {err}") from err
        wanted = set(mowers)
        return [s for s in items if s.mower_id in wanted]


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
        self, mowers: Collection[uuid.UUID], *, account_id: uuid.UUID, token: str | None
    ) -> list[MowerState]:
        """The account's latest rows of ``mowers``."""
        del token  # the mowers are the caller's visible ones already
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
        self, mowers: Collection[uuid.UUID], *, account_id: uuid.UUID, token: str | None
    ) -> list[MowerState]:
        """The known states of ``mowers`` in the account."""
        del token
        found = (self.states.get(m) for m in mowers)
        return [s for s in found if s is not None and s.account_id == account_id]


class NoLatestStates(LatestStates):
    """No fallback: a snapshot has only what the stream holds."""

    async def latest(
        self, mowers: Collection[uuid.UUID], *, account_id: uuid.UUID, token: str | None
    ) -> list[MowerState]:
        """Nothing."""
        del mowers, account_id, token
        return []
