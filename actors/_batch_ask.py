"""Asking many supervised actors one question each, the answers collected on the loop.

A batch pipeline (Telemetry's ingest, Notifications' state pipeline) hands each mower's
actor its part of a batch and needs every answer before it commits. Awaiting a pykka
future per actor would block the loop (see `_bridge`), and a loop wake-up per answer is a
system call apiece: the actors deliver into one `AnswerSink`, under a lock, and the last
answer resolves the sink's `done` on the loop through the `LoopBridge`, once per batch.
Actors not running yet start together, after their snapshots were read in one query
(`PrefetchedSnapshots`): a thousand new actors cost one round trip, not a thousand.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import pykka
import structlog

from actors._bridge import LoopBridge
from actors._snapshot import Snapshot
from actors._supervisor import ShardSupervisor

__all__ = ["AnswerSink", "BatchAsk", "PrefetchedSnapshots", "ReadSnapshots", "snapshots_by_id"]

_log = structlog.get_logger("actors.batch_ask")

K = TypeVar("K", bound=Hashable)
A = TypeVar("A")
V = TypeVar("V")

ReadSnapshots = Callable[[Sequence[str]], Awaitable[Mapping[str, Snapshot]]]
"""Reads the snapshots of many keys at once; a key without one is left out."""


def snapshots_by_id(
    read: Callable[[list[uuid.UUID]], Awaitable[Mapping[uuid.UUID, V]]],
    encode: Callable[[V], bytes],
) -> ReadSnapshots:
    """``ReadSnapshots`` for actors keyed by a mower id's text whose state a store reads as
    rows by id (``read``, one query for many) and ``encode`` makes a snapshot of."""

    async def snapshots(keys: Sequence[str]) -> dict[str, Snapshot]:
        ids = {uuid.UUID(key): key for key in keys}
        found = await read(list(ids))
        return {
            ids[m]: Snapshot(key=ids[m], state=encode(row), sequence=0) for m, row in found.items()
        }

    return snapshots


class AnswerSink(Generic[K, A]):
    """Collects one answer per actor of a batch; resolves ``done`` on the loop once all did.

    ``deliver`` may be called from any thread (the actors' workers); ``answers`` and
    ``done`` are read on the loop.
    """

    def __init__(self, bridge: LoopBridge, expected: int) -> None:
        self._bridge = bridge
        self._lock = threading.Lock()
        self._remaining = expected
        self.answers: dict[K, A | None] = {}
        self.done: asyncio.Future[None] = bridge.loop.create_future()
        if expected <= 0:
            self.done.set_result(None)

    def deliver(self, key: K, answer: A | None) -> None:
        """Record the answer for ``key`` (None: the actor failed); thread-safe."""
        with self._lock:
            self.answers[key] = answer
            self._remaining -= 1
            finished = self._remaining == 0
        if finished:
            self._bridge.call_soon(_resolve, self.done)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class PrefetchedSnapshots:
    """A `SnapshotStore` whose snapshots can be read many at a time, ahead of the starts.

    ``prefetch`` reads the snapshots of the keys about to start in one call of ``read``;
    each is handed out once, by the ``load`` that starts its actor. A ``load`` without a
    prefetch (a restart) reads that key alone. ``save`` goes to ``save`` (dropping any
    prefetched copy); without one it does nothing: for actors whose state the pipeline
    writes with each batch, never the actor.
    """

    def __init__(
        self, read: ReadSnapshots, save: Callable[[Snapshot], Awaitable[None]] | None = None
    ) -> None:
        self._read = read
        self._save = save
        self._prefetched: dict[str, Snapshot | None] = {}

    async def prefetch(self, keys: Sequence[str]) -> None:
        """Read the snapshots of ``keys`` for the next ``load`` of each."""
        found = await self._read(keys)
        for key in keys:
            self._prefetched[key] = found.get(key)

    async def load(self, key: str) -> Snapshot | None:
        """The key's snapshot, or None when it has none."""
        if key in self._prefetched:
            return self._prefetched.pop(key)
        return (await self._read([key])).get(key)

    async def save(self, snapshot: Snapshot) -> None:
        """Store ``snapshot`` through ``save``, if there is one."""
        if self._save is not None:
            self._prefetched.pop(snapshot.key, None)
            await self._save(snapshot)


class BatchAsk(Generic[K, A]):
    """Asks each of many supervised actors one question and collects the answers.

    ``key(k)`` is the supervisor's key of the actor that answers for ``k``; each question
    carries an `AnswerSink` into which that actor must ``deliver(k, answer)`` exactly once
    (None when it failed). Actors not running are started first, together, their
    snapshots prefetched when ``snapshots`` is given. ``on_starting(ks)`` hears of the
    items whose actors are about to start, before their snapshots are read;
    ``on_started(ks)`` of the same items once their actors started.
    """

    def __init__(
        self,
        supervisor: ShardSupervisor,
        bridge: LoopBridge,
        *,
        key: Callable[[K], str],
        snapshots: PrefetchedSnapshots | None = None,
        timeout: float = 10.0,
        on_starting: Callable[[list[K]], object] | None = None,
        on_started: Callable[[list[K]], object] | None = None,
        name: str = "actors",
    ) -> None:
        self._supervisor = supervisor
        self._bridge = bridge
        self._key = key
        self._snapshots = snapshots
        self._timeout = timeout
        self._on_starting = on_starting
        self._on_started = on_started
        self._name = name

    async def ask(
        self, items: Mapping[K, V], question: Callable[[V, AnswerSink[K, A]], object]
    ) -> dict[K, A | None]:
        """Tell each item's actor ``question(item, sink)``; every answer, None where none came.

        None for an item whose actor could not be started, was dead, failed, or did not
        answer within the timeout (logged).
        """
        refs = await self._refs(items)
        sink: AnswerSink[K, A] = AnswerSink(self._bridge, len(items))
        for k, item in items.items():
            ref = refs.get(k)
            if ref is None:
                sink.deliver(k, None)
                continue
            try:
                ref.tell(question(item, sink))
            except pykka.ActorDeadError:
                sink.deliver(k, None)
        try:
            # Shielded: a timeout must not cancel ``done``, which a late answer resolves.
            await asyncio.wait_for(asyncio.shield(sink.done), self._timeout)
        except TimeoutError:
            _log.error(
                "actors.did_not_answer",
                actors=self._name,
                asked=len(items),
                answered=len(sink.answers),
            )
        answers = sink.answers
        return {k: answers.get(k) for k in items}

    async def _refs(self, items: Mapping[K, Any]) -> dict[K, pykka.ActorRef[Any]]:
        supervisor, key = self._supervisor, self._key
        refs: dict[K, pykka.ActorRef[Any]] = {}
        missing: list[K] = []
        for k in items:
            ref = supervisor.get(key(k))
            if ref is None:
                missing.append(k)
            else:
                refs[k] = ref
        if not missing:
            return refs
        if self._on_starting is not None:
            self._on_starting(missing)
        keys = [key(k) for k in missing]
        if self._snapshots is not None:
            await self._snapshots.prefetch(keys)
        started = await supervisor.get_or_start_many(keys)
        if self._on_started is not None:
            self._on_started(missing)
        for k, result in zip(missing, started, strict=True):
            if isinstance(result, BaseException):
                _log.error("actors.unavailable", actors=self._name, key=key(k), error=repr(result))
            else:
                refs[k] = result
        return refs
