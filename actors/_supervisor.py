"""Shard supervisor: one actor per key (mower id), restarted from its snapshot on failure.

The factory makes an actor for a key from its last snapshot (None for a new key)::

    def factory(key: str, snapshot: Snapshot | None) -> pykka.ActorRef[Any]:
        state = decode(snapshot.state) if snapshot else fresh_state(key)
        return WatchActor.start(dispatcher=dispatcher, mower_id=key, state=state)

It must start a `DispatcherActor` on the supervisor's dispatcher and must not block.

Lifecycle of a key:

- `get_or_start(key)` loads the snapshot (on the loop), calls the factory and returns
  once the actor's `on_start` has run; a concurrent call for the same key waits for that
  start instead of starting twice.
- A failure (unhandled exception in `on_start`, in a `tell`-ed message, in `on_stop`)
  schedules a restart after a backoff that doubles per failure inside the window
  (`backoff_initial`, capped at `backoff_max`). The restart loads the snapshot again:
  the state the service last persisted, never the crashed actor's memory.
  `get_or_start` during the backoff waits for the restart.
- More than `max_restarts` failures inside `window_seconds`: the supervisor gives up,
  logs, counts, and `get_or_start(key)` raises `GaveUpError` until `stop(key)`
  clears the mark. Other keys are not touched.
- `stop_all()` refuses new starts, cancels pending restarts, asks every actor to stop in
  the order their keys were first started (each handles the mail queued before its stop)
  and waits until all have stopped.

All methods run on the event loop of the first async call; none block it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pykka
import structlog
from pykka.messages import ProxyGetAttr

from actors._bridge import LoopBridge, _inbox_of
from actors._dispatcher import Dispatcher
from actors._errors import GaveUpError, SupervisorClosedError
from actors._future import DispatcherFuture
from actors._metrics import ActorMetrics
from actors._snapshot import Snapshot, SnapshotStore

__all__ = ["ActorFactory", "ShardSupervisor"]

ActorFactory = Callable[[str, Snapshot | None], pykka.ActorRef[Any]]

_log = structlog.get_logger("actors.supervisor")
_STARTED_PROBE = ProxyGetAttr(attr_path=("actor_urn",))


@dataclass(eq=False)
class _Entry:
    ref: pykka.ActorRef[Any] | None = None
    actor_name: str = "unknown"
    failures: deque[float] = field(default_factory=deque)
    pending: asyncio.Future[None] | None = None  # set while starting or awaiting a restart
    timer: asyncio.TimerHandle | None = None
    task: asyncio.Task[None] | None = None


class ShardSupervisor:
    """Starts, finds, restarts and stops the actors of one shard, by key."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        factory: ActorFactory,
        snapshots: SnapshotStore,
        *,
        backoff_initial: float = 0.1,
        backoff_max: float = 30.0,
        max_restarts: int = 5,
        window_seconds: float = 60.0,
        metrics: ActorMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_failure: Callable[[str, BaseException, bool], None] | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        # Told on the loop of every failure: the key, the error, and whether the
        # supervisor gave up (True) or scheduled a restart (False).
        self._on_failure = on_failure
        self._factory = factory
        self._snapshots = snapshots
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._max_restarts = max_restarts
        self._window = window_seconds
        self._metrics = metrics
        self._clock = clock
        self._entries: dict[str, _Entry] = {}  # insertion order = first start order
        self._given_up: set[str] = set()
        self._closed = False
        self._bridge: LoopBridge | None = None

    # -- lookups -------------------------------------------------------------------

    def get(self, key: str) -> pykka.ActorRef[Any] | None:
        """Return the key's running actor, or None."""
        entry = self._entries.get(key)
        if entry is None or entry.ref is None or not entry.ref.is_alive():
            return None
        return entry.ref

    def keys(self) -> list[str]:
        """Return the supervised keys (running or awaiting a restart), in start order."""
        return list(self._entries)

    def given_up(self) -> frozenset[str]:
        """Return the keys the supervisor gave up on."""
        return frozenset(self._given_up)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    # -- lifecycle -----------------------------------------------------------------

    async def get_or_start(self, key: str) -> pykka.ActorRef[Any]:
        """Return the key's started actor, starting it from its snapshot (or restarting) first."""
        bridge = self._bind_loop()
        while True:
            if self._closed:
                raise SupervisorClosedError(key)
            if key in self._given_up:
                raise GaveUpError(key)
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry(pending=bridge.loop.create_future())
                await self._launch(key, entry, restart=False)
                continue
            if entry.pending is not None:
                await asyncio.shield(entry.pending)
                continue
            ref = entry.ref
            if ref is not None and ref.is_alive():
                return ref
            if ref is not None:
                # Died, and its termination callback is still on its way to the loop.
                self._on_terminated(key, ref, _inbox_of(ref).failure)
            else:
                self._entries.pop(key, None)  # a first start that was cancelled midway

    async def get_or_start_many(
        self, keys: Iterable[str]
    ) -> list[pykka.ActorRef[Any] | BaseException]:
        """`get_or_start` of each key, in order; the first starts among them share one wait.

        Keys seen for the first time are launched together: their snapshots loaded, their
        actors started, and one wait covers every new actor's `on_start` (separate calls
        would each wait for their own, a wake-up of the loop apiece). Every other key goes
        through `get_or_start`. Each result is the actor, or the exception `get_or_start`
        would have raised for that key.
        """
        bridge = self._bind_loop()
        keys = list(keys)
        fresh: dict[str, _Entry] = {}
        if not self._closed:
            for key in keys:
                if key not in self._entries and key not in self._given_up:
                    fresh[key] = self._entries[key] = _Entry(pending=bridge.loop.create_future())
        failed = await self._launch_many(fresh) if fresh else {}
        results: list[pykka.ActorRef[Any] | BaseException] = []
        for key in keys:
            error = failed.get(key)
            if error is not None:
                results.append(error)
                continue
            ref = self.get(key)
            if ref is None:
                try:
                    ref = await self.get_or_start(key)
                except Exception as err:  # as get_or_start would raise it to this caller
                    results.append(err)
                    continue
            results.append(ref)
        return results

    async def stop(self, key: str) -> bool:
        """Stop the key's actor (after its queued mail) and forget the key and its give-up."""
        bridge = self._bind_loop()
        self._given_up.discard(key)
        entry = self._entries.pop(key, None)
        if entry is None:
            return False
        await self._cancel([entry])
        if entry.ref is None:
            return False
        return await bridge.stop(entry.ref)

    async def stop_all(self) -> None:
        """Stop every actor in start order, cancel pending restarts, refuse new starts."""
        bridge = self._bind_loop()
        self._closed = True
        entries = list(self._entries.values())
        self._entries.clear()
        await self._cancel(entries)
        refs = [entry.ref for entry in entries if entry.ref is not None]
        # All stops are requested in order first, then awaited together: mowers do not
        # depend on each other, and one-at-a-time would make shutdown O(actors x hop).
        for ref in refs:
            ref.stop(block=False)
        await asyncio.gather(*(bridge.wait_stopped(ref) for ref in refs))
        _log.info("actors.supervisor_stopped", actors=len(refs))

    # -- internals -----------------------------------------------------------------

    def _bind_loop(self) -> LoopBridge:
        loop = asyncio.get_running_loop()
        if self._bridge is None:
            self._bridge = LoopBridge(loop)
        elif self._bridge.loop is not loop:
            msg = "a ShardSupervisor is bound to the event loop it was first used on"
            raise RuntimeError(msg)
        return self._bridge

    async def _launch(self, key: str, entry: _Entry, *, restart: bool) -> None:
        """Start the key's actor from its snapshot; resolve `entry.pending` either way."""
        bridge = self._bind_loop()
        pending = entry.pending
        try:
            made = await self._make(key, entry)
            if made is None:
                return  # stopped while the snapshot loaded
            ref, snapshot = made
        except Exception as error:
            entry.pending = None
            if not restart:
                if self._entries.get(key) is entry:  # not a newer start of the same key
                    del self._entries[key]
                raise
            _log.exception("actors.restart_failed", actor_key=key)
            self._record_failure(key, entry, error)
        else:
            entry.ref = ref
            entry.actor_name = ref.actor_class.__name__
            if self._metrics is not None:
                self._metrics.known(entry.actor_name)
            if restart:
                _log.info("actors.restarted", actor_key=key, sequence=_sequence(snapshot))
                if self._metrics is not None:
                    self._metrics.restarts.labels(actor=entry.actor_name).inc()

            _inbox_of(ref).add_termination_callback(self._termination_callback(key, ref))
            # Answered after on_start (and any mail the factory queued): callers get an
            # actor that has started. pykka handles ProxyGetAttr itself, not on_receive.
            # If on_start failed, the termination callback takes it from here.
            with contextlib.suppress(pykka.ActorDeadError):
                await bridge.wrap(ref.ask(_STARTED_PROBE, block=False))
        finally:
            entry.task = None
            # Waiters are answered only now, after on_start; and when this start was
            # cancelled, the next caller must find no pending start (or it would wait on
            # this finished future for ever, without the loop ever turning).
            if entry.pending is pending:
                entry.pending = None
            if pending is not None and not pending.done():
                pending.set_result(None)

    async def _make(
        self, key: str, entry: _Entry
    ) -> tuple[pykka.ActorRef[Any], Snapshot | None] | None:
        """The key's actor, started from its snapshot; None if the key was stopped meanwhile."""
        snapshot = await self._snapshots.load(key)
        if self._closed or self._entries.get(key) is not entry:
            return None
        ref = self._factory(key, snapshot)
        if _inbox_of(ref).dispatcher is not self._dispatcher:
            ref.stop(block=False)
            msg = f"factory started {ref} on another dispatcher"
            raise TypeError(msg)
        return ref, snapshot

    async def _launch_many(self, fresh: dict[str, _Entry]) -> dict[str, Exception]:
        """First starts of `fresh` (as `_launch` does one), then one wait for all on_starts.

        Returns the keys whose start failed, with the error; their entries are gone.
        """
        bridge = self._bind_loop()
        failed: dict[str, Exception] = {}
        probes: list[DispatcherFuture[Any]] = []
        starts = [(entry, entry.pending) for entry in fresh.values()]
        try:
            for key, entry in fresh.items():
                try:
                    made = await self._make(key, entry)
                except Exception as error:
                    if self._entries.get(key) is entry:
                        del self._entries[key]
                    failed[key] = error
                    continue
                if made is None:
                    continue  # stopped while the snapshots loaded
                ref = made[0]
                entry.ref = ref
                entry.actor_name = ref.actor_class.__name__
                if self._metrics is not None:
                    self._metrics.known(entry.actor_name)
                _inbox_of(ref).add_termination_callback(self._termination_callback(key, ref))
                if not _starts_with_code(ref):
                    continue  # nothing runs before its first message: nothing to wait for
                # If on_start failed, the termination callback takes it from here.
                with contextlib.suppress(pykka.ActorDeadError):
                    probe = ref.ask(_STARTED_PROBE, block=False)
                    if isinstance(probe, DispatcherFuture):
                        probes.append(probe)
            if probes:
                await _all_settled(bridge, probes)
        finally:
            # As in _launch: waiters are answered only now, a cancelled start leaves no
            # pending start behind (or the next caller would wait on it for ever), and a
            # restart scheduled meanwhile (on_start failed) keeps its own pending.
            for entry, pending in starts:
                if entry.pending is pending:
                    entry.pending = None
                if pending is not None and not pending.done():
                    pending.set_result(None)
        return failed

    def _termination_callback(
        self, key: str, ref: pykka.ActorRef[Any]
    ) -> Callable[[BaseException | None], None]:
        bridge = self._bind_loop()

        def terminated(failure: BaseException | None) -> None:
            bridge.call_soon(self._on_terminated, key, ref, failure)

        return terminated

    def _on_terminated(
        self, key: str, ref: pykka.ActorRef[Any], failure: BaseException | None
    ) -> None:
        entry = self._entries.get(key)
        if entry is None or entry.ref is not ref:
            return  # stopped on purpose, or already handled
        entry.ref = None
        if failure is None:
            # Stopped by someone else (ref.stop(), dispatcher.stop()): nothing to restart.
            del self._entries[key]
            return
        self._record_failure(key, entry, failure)

    def _record_failure(self, key: str, entry: _Entry, failure: BaseException) -> None:
        gave_up = self._restart_or_give_up(key, entry, failure)
        if self._on_failure is not None:
            try:
                self._on_failure(key, failure, gave_up)
            except Exception:
                _log.exception("actors.failure_callback_failed", actor_key=key)

    def _restart_or_give_up(self, key: str, entry: _Entry, failure: BaseException) -> bool:
        now = self._clock()
        failures = entry.failures
        while failures and now - failures[0] > self._window:
            failures.popleft()
        failures.append(now)
        if self._metrics is not None:
            self._metrics.failures.labels(actor=entry.actor_name).inc()
        if len(failures) > self._max_restarts:
            del self._entries[key]
            self._given_up.add(key)
            _log.error(
                "actors.gave_up",
                actor_key=key,
                actor=entry.actor_name,
                failures=len(failures),
                window_seconds=self._window,
                error=repr(failure),
            )
            if self._metrics is not None:
                self._metrics.give_ups.labels(actor=entry.actor_name).inc()
            return True
        delay = min(self._backoff_max, self._backoff_initial * 2 ** (len(failures) - 1))
        _log.warning(
            "actors.restart_scheduled",
            actor_key=key,
            actor=entry.actor_name,
            delay_seconds=delay,
            error=repr(failure),
        )
        loop = self._bind_loop().loop
        entry.pending = loop.create_future()
        entry.timer = loop.call_later(delay, self._begin_restart, key, entry)
        return False

    def _begin_restart(self, key: str, entry: _Entry) -> None:
        entry.timer = None
        if self._closed or self._entries.get(key) is not entry:
            return
        loop = self._bind_loop().loop
        entry.task = loop.create_task(self._launch(key, entry, restart=True))

    async def _cancel(self, entries: list[_Entry]) -> None:
        tasks = []
        for entry in entries:
            if entry.timer is not None:
                entry.timer.cancel()
                entry.timer = None
            if entry.task is not None:
                entry.task.cancel()
                tasks.append(entry.task)
            if entry.pending is not None and not entry.pending.done():
                entry.pending.set_result(None)  # waiters re-check and see the key is gone
        if tasks:
            await asyncio.wait(tasks)


def _starts_with_code(ref: pykka.ActorRef[Any]) -> bool:
    """Whether the actor's class has an ``on_start`` of its own (pykka's does nothing)."""
    return ref.actor_class.on_start is not pykka.Actor.on_start


async def _all_settled(bridge: LoopBridge, futures: list[DispatcherFuture[Any]]) -> None:
    """Wait until every future is settled, with one wake-up of the loop for all."""
    done = bridge.loop.create_future()
    lock = threading.Lock()
    remaining = len(futures)

    def settled(_future: DispatcherFuture[Any]) -> None:
        nonlocal remaining
        with lock:
            remaining -= 1
            last = remaining == 0
        if last:
            bridge.call_soon(_resolve, done)

    for future in futures:
        future.add_done_callback(settled)
    await done


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _sequence(snapshot: Snapshot | None) -> int | None:
    return None if snapshot is None else snapshot.sequence
