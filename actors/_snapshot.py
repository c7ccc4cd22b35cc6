"""Snapshot port: an actor's state with the stream sequence it covers.

Why the port is async: every durable adapter (PostgreSQL through asyncpg, a JetStream
key-value bucket) does network I/O, and in Mowdeck all I/O runs on the event loop.
Actors never call the store, because actors do no I/O: an actor *produces* a snapshot
(encoded bytes plus the last stream sequence folded into it) and the service persists it,
usually in the same transaction as the read-model change it belongs to. The supervisor
only calls `load`, on the loop, when it (re)starts an actor.

Why `state` is bytes: the snapshot crosses threads (worker -> loop) and processes (a
restart on another shard). Bytes are immutable, so nothing the actor later mutates can
leak into a stored snapshot, and every adapter stores exactly the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["InMemorySnapshotStore", "Snapshot", "SnapshotStore"]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """An actor's encoded state as of stream `sequence` (0: before any message)."""

    key: str
    state: bytes
    sequence: int

    def __post_init__(self) -> None:
        if self.sequence < 0:
            msg = f"snapshot sequence must not be negative, got {self.sequence}"
            raise ValueError(msg)


class SnapshotStore(Protocol):
    """Where actor snapshots live. Contract: `actors.testing.SnapshotStoreContract`.

    - `load` returns the stored snapshot of `key`, or None.
    - `save` keeps the snapshot unless one with a *higher* sequence is already stored:
      a late or replayed write never rolls an actor back. Equal sequences replace.
    """

    async def load(self, key: str) -> Snapshot | None:
        """Return the latest snapshot of `key`, or None if there is none."""
        ...

    async def save(self, snapshot: Snapshot) -> None:
        """Store `snapshot` unless a newer one (higher sequence) is stored."""
        ...


class InMemorySnapshotStore:
    """Snapshots in a dict: for unit tests and for services that need no durability."""

    def __init__(self) -> None:
        self._snapshots: dict[str, Snapshot] = {}

    async def load(self, key: str) -> Snapshot | None:
        """Return the latest snapshot of `key`, or None if there is none."""
        return self._snapshots.get(key)

    async def save(self, snapshot: Snapshot) -> None:
        """Store `snapshot` unless a newer one (higher sequence) is stored."""
        current = self._snapshots.get(snapshot.key)
        if current is None or current.sequence <= snapshot.sequence:
            self._snapshots[snapshot.key] = snapshot

    def __len__(self) -> int:
        return len(self._snapshots)
