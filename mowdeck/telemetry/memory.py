"""The in-memory store: the same contract as PostgreSQL, for unit tests (no retention lock)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

import msgspec

from contracts.v1 import MowerState
from mowdeck.telemetry.bins import downsample
from mowdeck.telemetry.model import (
    HistoryBin,
    HistoryRow,
    Memory,
    PositionRow,
    TimelineRow,
    history_row,
    position_row,
)
from mowdeck.telemetry.ports import Cutoffs, WriteBatch, WriteCounts

__all__ = ["InMemoryTelemetryStore"]


@dataclass
class _Entry:
    account_id: uuid.UUID
    event_at: datetime | None
    removed: bool = False


class InMemoryTelemetryStore:
    """Telemetry tables as dicts."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self.latest_rows: dict[uuid.UUID, tuple[MowerState, Memory]] = {}
        self.history_rows: dict[uuid.UUID, dict[datetime, tuple[uuid.UUID, HistoryRow]]] = {}
        self.position_rows: dict[uuid.UUID, dict[datetime, tuple[uuid.UUID, PositionRow]]] = {}
        self.timeline_rows: dict[tuple[uuid.UUID, str], TimelineRow] = {}
        self.directory: dict[uuid.UUID, _Entry] = {}

    # -- ingest --------------------------------------------------------------------

    @asynccontextmanager
    async def state_writer(self) -> AsyncIterator[_Writer]:
        """A batch transaction (a lock; writes are applied when the batch is written)."""
        async with self._lock:
            yield _Writer(self)

    async def memories(self, mower_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Memory]:
        """The stored memories of ``mower_ids``."""
        return {m: self.latest_rows[m][1] for m in mower_ids if m in self.latest_rows}

    # -- directory -----------------------------------------------------------------

    async def directory_account(self, mower_id: uuid.UUID) -> uuid.UUID | None:
        """The account of a known, not removed mower."""
        entry = self.directory.get(mower_id)
        return None if entry is None or entry.removed else entry.account_id

    async def seed_directory(self, entries: Sequence[tuple[uuid.UUID, uuid.UUID]]) -> int:
        """Add pairs no event has spoken about."""
        added = 0
        for mower_id, account_id in entries:
            entry = self.directory.get(mower_id)
            if entry is None or entry.event_at is None:
                self.directory[mower_id] = _Entry(account_id, None)
                added += 1
        return added

    async def register_mower(
        self, mower_id: uuid.UUID, account_id: uuid.UUID, occurred_at: datetime
    ) -> bool:
        """Apply a registration unless a newer event was applied (a removed id starts clean)."""
        entry = self.directory.get(mower_id)
        if entry is not None and entry.event_at is not None and entry.event_at > occurred_at:
            return False
        self.directory[mower_id] = _Entry(account_id, occurred_at)
        if entry is not None and entry.removed:
            self._purge(mower_id)
        return True

    async def remove_mower(self, mower_id: uuid.UUID, occurred_at: datetime) -> int:
        """Tombstone the mower and purge it, unless a newer event won."""
        entry = self.directory.get(mower_id)
        if entry is not None and entry.event_at is not None and entry.event_at > occurred_at:
            return 0  # registered again since: the new registration's rows stay
        account = entry.account_id if entry else uuid.UUID(int=0)
        self.directory[mower_id] = _Entry(account, occurred_at, removed=True)
        return self._purge(mower_id)

    def _purge(self, mower_id: uuid.UUID) -> int:
        deleted = len(self.history_rows.pop(mower_id, {}))
        deleted += len(self.position_rows.pop(mower_id, {}))
        deleted += 1 if self.latest_rows.pop(mower_id, None) is not None else 0
        for key in [k for k, row in self.timeline_rows.items() if row.mower_id == mower_id]:
            del self.timeline_rows[key]
            deleted += 1
        return deleted

    async def add_timeline(self, row: TimelineRow) -> bool:
        """Store a status transition once."""
        key = (row.command_id, row.status)
        if key in self.timeline_rows:
            return False
        self.timeline_rows[key] = row
        return True

    # -- queries -------------------------------------------------------------------

    async def latest(self, account_id: uuid.UUID, mower_id: uuid.UUID) -> MowerState | None:
        """The latest state of one of the account's mowers."""
        row = self.latest_rows.get(mower_id)
        if row is None or row[0].account_id != account_id:
            return None
        return row[0]

    async def latest_of_account(
        self,
        account_id: uuid.UUID,
        mower_ids: Collection[uuid.UUID] | None,
        *,
        after: uuid.UUID | None = None,
        limit: int | None = None,
    ) -> list[MowerState]:
        """The account's latest states, optionally of ``mower_ids`` only, behind ``after``."""
        found = [
            state
            for mower_id, (state, _) in sorted(self.latest_rows.items(), key=lambda kv: kv[0])
            if state.account_id == account_id
            and (mower_ids is None or mower_id in mower_ids)
            and (after is None or mower_id > after)
        ]
        return found if limit is None else found[:limit]

    def _history(
        self, account_id: uuid.UUID, mower_id: uuid.UUID, start: datetime, end: datetime
    ) -> list[HistoryRow]:
        rows = self.history_rows.get(mower_id, {})
        return [
            row
            for at, (acct, row) in sorted(rows.items())
            if acct == account_id and start <= at < end
        ]

    def _track(
        self, account_id: uuid.UUID, mower_id: uuid.UUID, start: datetime, end: datetime
    ) -> list[PositionRow]:
        rows = self.position_rows.get(mower_id, {})
        return [
            row
            for at, (acct, row) in sorted(rows.items())
            if acct == account_id and start <= at < end
        ]

    async def history(
        self,
        account_id: uuid.UUID,
        mower_id: uuid.UUID,
        start: datetime,
        end: datetime,
        limit: int,
    ) -> list[HistoryRow]:
        """History rows in ``[start, end)``."""
        return self._history(account_id, mower_id, start, end)[:limit]

    async def history_bins(
        self,
        account_id: uuid.UUID,
        mower_id: uuid.UUID,
        start: datetime,
        end: datetime,
        step: timedelta,
    ) -> list[HistoryBin]:
        """History downsampled by the pure helper."""
        return downsample(
            self._history(account_id, mower_id, start, end),
            self._track(account_id, mower_id, start, end),
            step,
        )

    async def track(
        self,
        account_id: uuid.UUID,
        mower_id: uuid.UUID,
        start: datetime,
        end: datetime,
        limit: int,
    ) -> list[PositionRow]:
        """Track points in ``[start, end)``."""
        return self._track(account_id, mower_id, start, end)[:limit]

    async def timeline(
        self,
        account_id: uuid.UUID,
        mower_id: uuid.UUID,
        start: datetime,
        end: datetime,
        limit: int,
    ) -> list[TimelineRow]:
        """Status transitions in ``[start, end)``."""
        rows = [
            row
            for row in self.timeline_rows.values()
            if row.mower_id == mower_id and row.account_id == account_id and start <= row.at < end
        ]
        rows.sort(key=lambda r: (r.at, str(r.command_id), r.status))
        return rows[:limit]

    # -- retention -----------------------------------------------------------------

    async def retention_round(
        self,
        cutoffs: Cutoffs,
        batch_rows: int,  # noqa: ARG002 - dict deletes need no batches
    ) -> dict[str, int] | None:
        """Delete old rows; the in-memory store has no lock, so it always runs."""
        deleted = {
            "mower_history": 0,
            "mower_positions": 0,
            "command_timeline": 0,
            "mower_directory": 0,
        }
        for rows in self.history_rows.values():
            for at in [at for at in rows if at < cutoffs.history]:
                del rows[at]
                deleted["mower_history"] += 1
        for points in self.position_rows.values():
            for at in [at for at in points if at < cutoffs.positions]:
                del points[at]
                deleted["mower_positions"] += 1
        for key in [k for k, r in self.timeline_rows.items() if r.at < cutoffs.timeline]:
            del self.timeline_rows[key]
            deleted["command_timeline"] += 1
        for mower_id in [
            m
            for m, entry in self.directory.items()
            if entry.removed and entry.event_at is not None and entry.event_at < cutoffs.tombstones
        ]:
            del self.directory[mower_id]
            deleted["mower_directory"] += 1
        return deleted


class _Writer:
    def __init__(self, store: InMemoryTelemetryStore) -> None:
        self._store = store

    async def lock(
        self, mower_ids: Sequence[uuid.UUID]
    ) -> tuple[dict[uuid.UUID, Memory], dict[uuid.UUID, uuid.UUID]]:
        store = self._store
        memories = await store.memories(mower_ids)
        accounts = {
            m: e.account_id
            for m in mower_ids
            if (e := store.directory.get(m)) is not None and not e.removed
        }
        return memories, accounts

    async def write(self, batch: WriteBatch) -> WriteCounts:
        store = self._store
        latest = 0
        for state, memory in batch.latest:
            current = store.latest_rows.get(state.mower_id)
            if current is None or (
                current[0].observed_at <= state.observed_at
                and current[0].account_id == state.account_id
            ):
                store.latest_rows[state.mower_id] = (state, memory)
                latest += 1
        # The reasserted mowers' latest states (as stored now) join the history rows.
        reasserted: list[MowerState] = []
        for mower_id in batch.reassert:
            if (stored := store.latest_rows.get(mower_id)) is not None:
                state, memory = stored
                replaced = msgspec.structs.replace(memory, history_at=state.observed_at)
                store.latest_rows[mower_id] = (state, replaced)
                reasserted.append(state)
        history = 0
        for state in (*batch.history, *reasserted):
            rows = store.history_rows.setdefault(state.mower_id, {})
            if state.observed_at not in rows:
                rows[state.observed_at] = (state.account_id, history_row(state))
                history += 1
        positions = 0
        for state in batch.positions:
            if state.position is None:
                continue
            points = store.position_rows.setdefault(state.mower_id, {})
            if state.observed_at not in points:
                points[state.observed_at] = (state.account_id, position_row(state))
                positions += 1
        return WriteCounts(latest, history, positions)
