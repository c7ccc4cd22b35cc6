"""The store port: what ingest, the directory, queries and retention need from storage."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from contracts.v1 import MowerState
from mowdeck.telemetry.model import HistoryBin, HistoryRow, Memory, PositionRow, TimelineRow

__all__ = ["Cutoffs", "StateWriter", "TelemetryStore", "WriteBatch", "WriteCounts"]


@dataclass(slots=True)
class WriteBatch:
    """One commit of ingest: the newest state per mower with its memory, history, track."""

    latest: list[tuple[MowerState, Memory]] = field(default_factory=list)
    history: list[MowerState] = field(default_factory=list)
    positions: list[MowerState] = field(default_factory=list)
    # Mowers whose latest state (as stored once ``latest`` is written) is written to the
    # history again, its memory's ``history_at`` moved to it: an older state of theirs
    # was written to the history (``fingerprint.Decision.reassert``).
    reassert: list[uuid.UUID] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.latest or self.history or self.positions or self.reassert)


@dataclass(frozen=True, slots=True)
class WriteCounts:
    """Rows a batch actually wrote per table (duplicates and guarded rows excluded)."""

    latest: int = 0
    history: int = 0
    positions: int = 0


@dataclass(frozen=True, slots=True)
class Cutoffs:
    """Rows older than these times are deleted by retention."""

    history: datetime
    positions: datetime
    timeline: datetime
    # Directory tombstones (removed mowers) whose removal is older than this.
    tombstones: datetime

    @classmethod
    def at(
        cls,
        now: datetime,
        history_days: int,
        positions_days: int,
        timeline_days: int,
        tombstone_days: int | None = None,
    ) -> Cutoffs:
        """The cutoffs of a retention round at ``now``.

        Without ``tombstone_days`` a tombstone lives as long as the longest-kept table:
        by then nothing stored about the mower is left, and no seed is that stale.
        """
        if tombstone_days is None:
            tombstone_days = max(history_days, positions_days, timeline_days)
        return cls(
            history=now - timedelta(days=history_days),
            positions=now - timedelta(days=positions_days),
            timeline=now - timedelta(days=timeline_days),
            tombstones=now - timedelta(days=tombstone_days),
        )


class StateWriter(Protocol):
    """One ingest transaction: lock the latest rows, then write a batch."""

    async def lock(
        self, mower_ids: Sequence[uuid.UUID]
    ) -> tuple[dict[uuid.UUID, Memory], dict[uuid.UUID, uuid.UUID]]:
        """Lock and read the memories of ``mower_ids``; also their directory accounts."""
        ...

    async def write(self, batch: WriteBatch) -> WriteCounts:
        """Write the batch: latest rows guarded by observed_at, history and track appended,
        then the ``reassert`` mowers' latest states appended to the history."""
        ...


class TelemetryStore(Protocol):
    """Telemetry storage. Contract: ``tests/unit/telemetry/store_contract.py``.

    Writes raise ``StoreRejectedError`` when the store refuses the data itself (a retry
    would be refused again) and ``StoreError`` when it failed otherwise.
    """

    def state_writer(self) -> AbstractAsyncContextManager[StateWriter]:
        """A transaction for one ingest batch; commits on a clean exit."""
        ...

    async def memories(self, mower_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Memory]:
        """The stored memories (actor snapshots) of ``mower_ids``."""
        ...

    async def directory_account(self, mower_id: uuid.UUID) -> uuid.UUID | None:
        """The account of a mower the directory knows (and that was not removed)."""
        ...

    async def seed_directory(self, entries: Sequence[tuple[uuid.UUID, uuid.UUID]]) -> int:
        """Add ``(mower_id, account_id)`` pairs no event has spoken about; returns how many."""
        ...

    async def register_mower(
        self, mower_id: uuid.UUID, account_id: uuid.UUID, occurred_at: datetime
    ) -> bool:
        """Apply a registered/updated event unless a newer event was applied."""
        ...

    async def remove_mower(self, mower_id: uuid.UUID, occurred_at: datetime) -> int:
        """Purge everything stored about the mower and tombstone it; returns rows deleted."""
        ...

    async def add_timeline(self, row: TimelineRow) -> bool:
        """Store a command status transition; False if it was stored already."""
        ...

    async def latest(self, account_id: uuid.UUID, mower_id: uuid.UUID) -> MowerState | None:
        """The latest state of one of the account's mowers."""
        ...

    async def latest_of_account(
        self,
        account_id: uuid.UUID,
        mower_ids: Collection[uuid.UUID] | None,
        *,
        after: uuid.UUID | None = None,
        limit: int | None = None,
    ) -> list[MowerState]:
        """The account's latest states, of ``mower_ids`` only unless None; by mower id,
        of the mowers behind ``after`` only unless None, at most ``limit`` unless None."""
        ...

    async def history(
        self,
        account_id: uuid.UUID,
        mower_id: uuid.UUID,
        start: datetime,
        end: datetime,
        limit: int,
    ) -> list[HistoryRow]:
        """History rows in ``[start, end)``, oldest first, at most ``limit``."""
        ...

    async def history_bins(
        self,
        account_id: uuid.UUID,
        mower_id: uuid.UUID,
        start: datetime,
        end: datetime,
        step: timedelta,
    ) -> list[HistoryBin]:
        """History in ``[start, end)`` downsampled to bins of ``step`` from 2000-01-01 UTC."""
        ...

    async def track(
        self,
        account_id: uuid.UUID,
        mower_id: uuid.UUID,
        start: datetime,
        end: datetime,
        limit: int,
    ) -> list[PositionRow]:
        """Track points in ``[start, end)``, oldest first, at most ``limit``."""
        ...

    async def timeline(
        self,
        account_id: uuid.UUID,
        mower_id: uuid.UUID,
        start: datetime,
        end: datetime,
        limit: int,
    ) -> list[TimelineRow]:
        """Command status transitions in ``[start, end)``, oldest first, at most ``limit``."""
        ...

    async def retention_round(self, cutoffs: Cutoffs, batch_rows: int) -> dict[str, int] | None:
        """Delete rows older than the cutoffs; None when another replica holds the round."""
        ...
