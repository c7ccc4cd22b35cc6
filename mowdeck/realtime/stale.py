"""Latest states of mowers the TELEMETRY stream no longer holds, from Telemetry's read model.

A port with three adapters: Telemetry's tables read through its own store (the mowers
are the caller's visible ones already; works for every stream), its HTTP API
(``GET /v1/states`` with the caller's own token, so Telemetry scopes the answer exactly as
for the caller; a ticket stream has no token to forward), and an in-memory one.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable
from typing import Protocol

import aiohttp
import msgspec

from contracts.v1 import MowerState
from mowdeck.realtime.errors import StatesUnavailableError
from mowdeck.telemetry.errors import TelemetryError
from mowdeck.telemetry.ports import TelemetryStore

__all__ = [
    "HttpLatestStates",
    "LatestStates",
    "MemoryLatestStates",
    "NoLatestStates",
    "ReadModelLatestStates",
]


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


class ReadModelLatestStates(LatestStates):
    """Telemetry's latest states read through its store (its PostgreSQL tables)."""

    def __init__(self, store: TelemetryStore) -> None:
        self._store = store

    async def latest(
        self, mowers: Collection[uuid.UUID], *, account_id: uuid.UUID, token: str | None
    ) -> list[MowerState]:
        """The account's latest rows of ``mowers``."""
        del token
        if not mowers:
            return []
        try:
            return await self._store.latest_of_account(account_id, mowers)
        except TelemetryError as err:
            raise StatesUnavailableError(f"telemetry's tables cannot be read: {err}") from err


class MemoryLatestStates(LatestStates):
    """States kept in a dict (tests, and processes without Telemetry)."""

    def __init__(self, states: Iterable[MowerState] = ()) -> None:
        self.states = {s.mower_id: s for s in states}

    async def latest(
        self, mowers: Collection[uuid.UUID], *, account_id: uuid.UUID, token: str | None
    ) -> list[MowerState]:
        """The states of ``mowers`` that are known."""
        del account_id, token  # nothing to scope: the dict holds only what a test put there
        return [self.states[m] for m in mowers if m in self.states]


class NoLatestStates(LatestStates):
    """No fallback: a snapshot has only what the stream holds."""

    async def latest(
        self, mowers: Collection[uuid.UUID], *, account_id: uuid.UUID, token: str | None
    ) -> list[MowerState]:
        """Nothing."""
        del mowers, account_id, token
        return []
