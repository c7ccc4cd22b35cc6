"""Test helpers for code built on `actors`: loop stall monitor, leak check, contracts.

Import this from tests only (it imports pytest).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pykka
import pytest

from actors._snapshot import Snapshot, SnapshotStore

__all__ = [
    "SnapshotStoreContract",
    "StallReport",
    "leftover_actors_and_threads",
    "loop_stall_monitor",
]


@dataclass
class StallReport:
    """What `loop_stall_monitor` saw: the longest time the loop could not run a tick."""

    interval: float
    max_stall: float = 0.0
    ticks: int = 0
    _last: float = field(default=0.0, repr=False)

    def _tick(self, now: float) -> None:
        self.max_stall = max(self.max_stall, now - self._last - self.interval)
        self._last = now


@contextlib.asynccontextmanager
async def loop_stall_monitor(interval: float = 0.001) -> AsyncIterator[StallReport]:
    """Measure the event loop's longest stall while the block runs.

    A heartbeat task sleeps `interval` seconds in a loop; a stall is how much later than
    that it woke up. The gap up to leaving the block counts too, so a blocking call just
    before the end is not missed.
    """
    report = StallReport(interval=interval, _last=time.perf_counter())

    async def heartbeat() -> None:
        while True:
            await asyncio.sleep(interval)
            report._tick(time.perf_counter())
            report.ticks += 1

    task = asyncio.get_running_loop().create_task(heartbeat())
    await asyncio.sleep(0)  # let the heartbeat start before the measured work
    try:
        yield report
    finally:
        report._tick(time.perf_counter())
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def leftover_actors_and_threads(
    thread_prefixes: tuple[str, ...] = ("mowdeck-actors-",),
) -> list[str]:
    """Describe actors still registered with pykka and matching threads still alive.

    Dispatcher workers are named `mowdeck-actors-<dispatcher>-<n>`; pass the name prefixes
    of `ThreadingActor` classes too (their threads are named `<ClassName>-<n>`).
    """
    leftovers = [f"actor {ref}" for ref in pykka.ActorRegistry.get_all()]
    leftovers += [
        f"thread {thread.name}"
        for thread in threading.enumerate()
        if thread.is_alive() and thread.name.startswith(thread_prefixes)
    ]
    return leftovers


class SnapshotStoreContract:
    """Contract every `SnapshotStore` adapter passes.

    Subclass it in a test module as `Test...` and provide a `store` fixture (it may be
    parametrized over adapters). Each test gets a fresh, empty store.
    """

    async def test_load_unknown_key_returns_none(self, store: SnapshotStore) -> None:
        assert await store.load("mower-unknown") is None

    async def test_save_then_load_returns_the_snapshot(self, store: SnapshotStore) -> None:
        snapshot = Snapshot("mower-1", b"\x00state\xff", 7)
        await store.save(snapshot)
        assert await store.load("mower-1") == snapshot

    async def test_higher_sequence_replaces(self, store: SnapshotStore) -> None:
        await store.save(Snapshot("mower-1", b"old", 3))
        await store.save(Snapshot("mower-1", b"new", 4))
        assert await store.load("mower-1") == Snapshot("mower-1", b"new", 4)

    async def test_lower_sequence_never_rolls_back(self, store: SnapshotStore) -> None:
        await store.save(Snapshot("mower-1", b"new", 10))
        await store.save(Snapshot("mower-1", b"late", 9))
        assert await store.load("mower-1") == Snapshot("mower-1", b"new", 10)

    async def test_equal_sequence_replaces(self, store: SnapshotStore) -> None:
        await store.save(Snapshot("mower-1", b"first", 5))
        await store.save(Snapshot("mower-1", b"second", 5))
        assert await store.load("mower-1") == Snapshot("mower-1", b"second", 5)

    async def test_keys_are_independent(self, store: SnapshotStore) -> None:
        await store.save(Snapshot("mower-1", b"one", 1))
        await store.save(Snapshot("mower-2", b"two", 100))
        await store.save(Snapshot("mower-1", b"one-b", 2))
        assert await store.load("mower-1") == Snapshot("mower-1", b"one-b", 2)
        assert await store.load("mower-2") == Snapshot("mower-2", b"two", 100)

    async def test_empty_state_and_sequence_zero_round_trip(self, store: SnapshotStore) -> None:
        await store.save(Snapshot("mower-0", b"", 0))
        assert await store.load("mower-0") == Snapshot("mower-0", b"", 0)

    async def test_large_state_round_trips(self, store: SnapshotStore) -> None:
        state = bytes(range(256)) * 1024
        await store.save(Snapshot("mower-big", state, 1))
        loaded = await store.load("mower-big")
        assert loaded is not None
        assert loaded.state == state

    def test_negative_sequence_is_refused(self) -> None:
        with pytest.raises(ValueError, match="negative"):
            Snapshot("mower-1", b"", -1)
