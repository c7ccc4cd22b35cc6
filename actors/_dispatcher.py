"""The dispatcher: a few worker threads that run whichever actors have mail.

Scheduling, in short (details in docs/actors.md):

- Each started actor is in one state: idle, ready (in the normal or the emergency ready
  queue), running (on exactly one worker) or dead. `schedule_start`, the workers and a
  normal put that finds the actor idle change it under the dispatcher's one lock. A
  normal put to a ready or running actor takes no lock: it appends and is done, and a
  worker that lets an actor go idle looks at its lanes once more afterwards. An
  emergency put takes no lock either: it appends to the actor's emergency lane and drops
  a hint in the emergency ready queue; the worker that pops the hint claims the actor
  under the lock.
- Nobody blocks on the lock in the hot paths (`take_lock`): a thread blocked in
  `acquire` takes the lock while it still waits for the GIL, and then everyone queues
  behind it (a lock convoy: a context switch per message). A sleeping worker waits on
  its own wake lock, not on a Condition tied to the dispatcher's lock.
- A put wakes a worker only when an actor goes from idle to ready *and* a worker is
  idle; a busy actor's mail is picked up by the worker already running it. That is what
  keeps thousands of actors cheap: no thread per actor, no wakeup per message.
- A worker takes actors with emergency mail first; within a turn an actor handles its
  emergency lane first, and a turn of normal mail ends early as soon as another actor
  has emergency mail waiting. A turn handles at most `batch` messages, then the actor
  goes to the back of the ready queue, so one busy mower cannot starve the others.
"""

from __future__ import annotations

import contextvars
import os
import queue
import random
import threading
import time
from _thread import LockType as _LockType
from _thread import allocate_lock as _allocate_lock
from collections import deque
from typing import TYPE_CHECKING, Any, Final

import structlog
from pykka import ActorDeadError, messages

from actors._errors import DispatcherNotRunningError
from actors._handling import HandlingStats
from actors._inbox import RunnableActor, TwoLaneInbox
from actors._states import DEAD, IDLE, READY_EMERGENCY, READY_NORMAL, RUNNING

if TYPE_CHECKING:
    from pykka._envelope import Envelope

    from actors._metrics import ActorMetrics

__all__ = ["Dispatcher"]

_log = structlog.get_logger("actors.dispatcher")
_pause = time.sleep
# How long a thread that finds the lock taken gives the GIL away before it tries again.
_CONTENDED_PAUSE: Final = 0.000_02


class Dispatcher:
    """A fixed pool of worker threads shared by many `DispatcherActor`s."""

    def __init__(
        self,
        workers: int = 2,
        batch: int = 32,
        slow_handler_seconds: float = 0.05,
        metrics: ActorMetrics | None = None,
        *,
        name: str | None = None,
    ) -> None:
        if workers < 1 or batch < 1:
            msg = f"workers and batch must be at least 1, got {workers=} {batch=}"
            raise ValueError(msg)
        # Unique among the dispatchers alive at once, which is what tells their worker
        # threads apart; a process-wide counter would be state shared by all of them.
        self.name = name or f"{id(self):x}"
        self.lock = threading.Lock()
        self._drained = threading.Condition(self.lock)
        self._workers = workers
        self._batch = batch
        self._slow_seconds = slow_handler_seconds
        self._metrics = metrics
        self._ready_normal: deque[TwoLaneInbox] = deque()
        self._ready_emergency: deque[TwoLaneInbox] = deque()
        # Wake locks of the workers that are asleep (each held, released once to wake).
        self._sleepers: list[_LockType] = []
        self._live: dict[TwoLaneInbox, None] = {}  # insertion order = start order
        self._threads: list[threading.Thread] = []
        self._stats: list[HandlingStats] = []
        self._state = "new"  # new -> running -> stopping -> stopped
        self.stop_condition = threading.Condition()  # shared by the actors' StopFlags
        self._urn_bits = random.Random(os.urandom(32)).getrandbits

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> None:
        """Start the worker threads."""
        with self.lock:
            if self._state != "new":
                msg = f"dispatcher {self.name} cannot start twice"
                raise RuntimeError(msg)
            self._state = "running"
        for index in range(self._workers):
            stats = HandlingStats()
            self._stats.append(stats)
            # Each worker runs in a copy of the context of the code that started the
            # dispatcher, as an asyncio task does: what it logs carries the bindings of
            # its owner (a service's name). A thread starts with an empty context.
            thread = threading.Thread(
                target=contextvars.copy_context().run,
                args=(self._work, stats),
                name=f"mowdeck-actors-{self.name}-{index}",
                # Daemon: a forgotten dispatcher must not hang interpreter exit. Orderly
                # shutdown is stop()'s job, and the composition root calls it.
                daemon=True,
            )
            self._threads.append(thread)
            thread.start()
        if self._metrics is not None:
            self._metrics.attach(self)

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop every actor (each handles its queued mail first), then the workers.

        Returns False if actors or workers were still busy when `timeout` ran out.
        """
        if threading.current_thread() in self._threads:
            msg = "a dispatcher cannot be stopped from one of its own actors"
            raise RuntimeError(msg)
        deadline = time.monotonic() + timeout
        with self.lock:
            if self._state == "new":
                self._state = "stopped"
                return True
            state = self._state
            if state == "running":
                self._state = "stopping"
            inboxes = list(self._live)
        if state == "stopped":  # again, e.g. after a timeout: join what is left
            for thread in self._threads:
                thread.join(max(0.0, deadline - time.monotonic()))
            return not any(thread.is_alive() for thread in self._threads)
        for inbox in inboxes:  # in start order
            actor = inbox.actor
            if actor is not None:
                actor.actor_ref.stop(block=False)
        with self.lock:
            while self._live and (remaining := deadline - time.monotonic()) > 0:
                self._drained.wait(remaining)
            leftover = len(self._live)
            self._state = "stopped"
            for wake in self._sleepers:
                wake.release()
            self._sleepers.clear()
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if self._metrics is not None:
            self._metrics.detach(self)
        busy = [t.name for t in self._threads if t.is_alive()]
        if leftover or busy:
            _log.error("actors.dispatcher_stop_timeout", actors=leftover, busy_workers=busy)
            return False
        return True

    @property
    def workers_alive(self) -> bool:
        """True while every worker thread runs (for a service's liveness check)."""
        return bool(self._threads) and all(thread.is_alive() for thread in self._threads)

    @property
    def running(self) -> bool:
        """Whether actors can be started."""
        return self._state == "running"

    def new_urn(self) -> str:
        """Return a fresh random (version 4) UUID URN for an actor."""
        # uuid.uuid4() makes a urandom syscall per call; one seeded generator per
        # dispatcher gives the same uniqueness for an in-process identifier.
        value = self._urn_bits(128) & ~(0xF000 << 64) & ~(0xC000 << 48)
        value |= (0x4000 << 64) | (0x8000 << 48)
        text = f"{value:032x}"
        return f"urn:uuid:{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"

    def check_accepting(self) -> None:
        """Raise `DispatcherNotRunningError` unless actors can be started now."""
        if self._state != "running":
            msg = f"dispatcher {self.name} is {self._state}"
            raise DispatcherNotRunningError(msg)

    # -- figures -------------------------------------------------------------------

    def census(self) -> tuple[int, tuple[int, int]]:
        """Return (live actors, (normal, emergency) queued messages)."""
        with self.lock:
            inboxes = list(self._live)
        normal = sum(len(inbox.normal) for inbox in inboxes)
        emergency = sum(len(inbox.emergency) for inbox in inboxes)
        return len(inboxes), (normal, emergency)

    def handling_stats(self) -> list[HandlingStats]:
        """Per-worker handling-time rows (read by `ActorMetrics`)."""
        return list(self._stats)

    def __len__(self) -> int:
        return len(self._live)

    # -- called by actors and inboxes ----------------------------------------------

    def schedule_start(self, inbox: TwoLaneInbox) -> None:
        """Make a new actor runnable: its first turn runs `on_start`, then its mail."""
        with self.lock:
            if self._state == "running":
                self._live[inbox] = None
                self.make_ready(inbox, emergency=bool(inbox.emergency))
                return
        # Lost a race with stop(): pykka has already registered the actor, so undo that.
        actor = inbox.actor
        if actor is not None:
            actor._handle_failure(*_not_running(self))
            self._teardown(inbox, actor)

    def make_ready(self, inbox: TwoLaneInbox, *, emergency: bool) -> None:
        """Queue an actor to run and wake an idle worker (caller holds the lock)."""
        if emergency:
            inbox.state = READY_EMERGENCY
            self._ready_emergency.append(inbox)
        else:
            inbox.state = READY_NORMAL
            self._ready_normal.append(inbox)
        if self._sleepers:
            self._sleepers.pop(0).release()

    def take_lock(self) -> None:
        """Acquire the dispatcher's lock without joining a convoy (for the hot paths).

        A thread that blocks in `Lock.acquire` gets the lock as soon as it is released,
        then waits for the GIL while it holds the lock; everyone else then blocks on the
        lock in turn, and every message costs context switches. So: try, and while the
        lock is taken, give the GIL away for a moment (the holder needs it to finish).
        """
        acquire = self.lock.acquire
        if acquire(False):
            return
        while not acquire(False):
            _pause(_CONTENDED_PAUSE)

    def hint_emergency(self, inbox: TwoLaneInbox) -> None:
        """Flag an actor that just got emergency mail (called without the lock)."""
        self._ready_emergency.append(inbox)
        # Read without the lock: a worker going to sleep re-checks the emergency queue
        # after joining the sleepers, so either it sees this hint or this sees it asleep.
        if self._sleepers:
            self.take_lock()
            try:
                if self._sleepers:
                    self._sleepers.pop(0).release()
            finally:
                self.lock.release()

    # -- workers -------------------------------------------------------------------

    def _work(self, stats: HandlingStats) -> None:
        inbox: TwoLaneInbox | None = None
        dead: list[TwoLaneInbox] = []
        wake = _allocate_lock()
        wake.acquire()
        take_lock = self.take_lock
        release = self.lock.release
        while True:
            take_lock()
            try:
                if inbox is not None and inbox.state == RUNNING:
                    self._end_turn(inbox)
                inbox = self._next_ready(dead)
                if inbox is not None:
                    inbox.state = RUNNING
                    sleep = False
                elif dead or self._state == "stopped":
                    sleep = False
                else:
                    self._sleepers.append(wake)
                    # Read after joining the sleepers: hint_emergency appends its hint
                    # and then reads the sleepers without the lock, so either it sees
                    # this worker asleep or this sees its hint.
                    sleep = not self._ready_emergency
                    if not sleep:
                        self._sleepers.remove(wake)
            finally:
                release()
            if sleep:
                wake.acquire()  # until a put, a hint or stop() releases it
                continue
            while dead:  # emergency mail that raced with a teardown: answer it
                self._drain(dead.pop())
            if inbox is not None:
                try:
                    self._run_turn(inbox, stats)
                except BaseException as err:  # a shared worker must survive what escaped
                    self._fail_turn(inbox, err)
            elif self._state == "stopped":
                return

    def _fail_turn(self, inbox: TwoLaneInbox, error: BaseException) -> None:
        # What escaped pykka's own handling (a SystemExit from on_start, which pykka's
        # setup does not catch; a failing metric or log call) must not end this worker:
        # the other actors it serves would wait for ever. The actor dies as failed, so its
        # supervisor restarts it.
        _log.critical("actors.turn_failed", actor=str(inbox.actor), exc_info=error)
        actor = inbox.actor
        if actor is None or inbox.state == DEAD:
            return
        try:
            # As pykka fails an actor: remember the failure, unregister, mark it stopped.
            actor._handle_failure(type(error), error, error.__traceback__)
        except Exception:
            _log.exception("actors.failure_handling_failed", actor=str(actor))
            actor.actor_stopped.set()
        self._teardown(inbox, actor)

    def _end_turn(self, inbox: TwoLaneInbox) -> None:
        # Caller holds the lock: requeue an actor after its turn, or let it go idle.
        if inbox.emergency:
            inbox.state = READY_EMERGENCY
            self._ready_emergency.append(inbox)
        elif inbox.normal:
            inbox.state = READY_NORMAL
            self._ready_normal.append(inbox)
        else:
            inbox.state = IDLE
            # A normal put appends without the lock and then reads the state: look
            # again, after writing IDLE, so that either this sees its envelope or the
            # put sees IDLE (and takes the lock to make the actor ready).
            if inbox.normal:
                inbox.state = READY_NORMAL
                self._ready_normal.append(inbox)

    def _next_ready(self, dead: list[TwoLaneInbox]) -> TwoLaneInbox | None:
        # Caller holds the lock. Entries whose state moved on are stale and skipped.
        ready = self._ready_emergency
        while ready:
            inbox = ready.popleft()
            state = inbox.state
            if state == READY_EMERGENCY:
                return inbox
            if inbox.emergency:  # a hint from a lock-free emergency put
                if state in (IDLE, READY_NORMAL):
                    return inbox
                if state == DEAD:
                    dead.append(inbox)
            # RUNNING: its worker takes the emergency next. NEW: starts with it.
        ready = self._ready_normal
        while ready:
            inbox = ready.popleft()
            if inbox.state == READY_NORMAL:
                return inbox
        return None

    def _run_turn(self, inbox: TwoLaneInbox, stats: HandlingStats) -> None:
        actor = inbox.actor
        if actor is None:  # pragma: no cover - only dead inboxes lose their actor
            return
        stopped = actor.actor_stopped
        if not inbox.started:
            inbox.started = True
            actor._actor_loop_setup()  # on_start, with pykka's failure handling
            if stopped.is_set():
                self._teardown(inbox, actor)
                return
        emergency = inbox.emergency
        normal = inbox.normal
        others_urgent = self._ready_emergency
        receive = actor._receive_envelope
        clock = time.perf_counter
        slow = self._slow_seconds
        observe = stats.observe if self._metrics is not None else None
        actor_name = type(actor).__name__
        for _ in range(self._batch):
            if emergency:
                envelope = emergency.popleft()
            elif normal and not others_urgent:
                envelope = normal.popleft()
            else:
                break
            started = clock()
            receive(envelope)
            took = clock() - started
            if observe is not None:
                observe(actor_name, took)
            if took > slow:
                self._report_slow(actor, envelope.message, took)
            if stopped.is_set():
                self._teardown(inbox, actor)
                return

    def _teardown(self, inbox: TwoLaneInbox, actor: RunnableActor) -> None:
        self.take_lock()
        try:
            inbox.state = DEAD
            callbacks = inbox.take_termination_callbacks()
            self._live.pop(inbox, None)
            if not self._live:
                self._drained.notify_all()
        finally:
            self.lock.release()
        # Puts now fail fast; answer what was queued before, as pykka's teardown does.
        self._drain(inbox)
        inbox.actor = None  # an ActorRef may outlive the actor; don't let it pin the state
        for callback in callbacks:
            try:
                callback(inbox.failure)
            except Exception:
                _log.exception("actors.termination_callback_failed", actor=str(actor))

    def _drain(self, inbox: TwoLaneInbox) -> None:
        # Not pykka's _actor_loop_teardown: a lock-free emergency put may race with it, so
        # an empty lane is not an error here.
        while True:
            try:
                envelope = inbox.get()
            except queue.Empty:
                return
            self.reject(inbox, envelope)

    def _report_slow(self, actor: RunnableActor, message: object, seconds: float) -> None:
        kind = type(message).__name__
        if isinstance(message, messages.ProxyCall | messages.ProxyGetAttr):
            kind = f"{kind}:{'.'.join(message.attr_path)}"
        _log.warning(
            "actors.slow_handler",
            actor=type(actor).__name__,
            actor_urn=actor.actor_urn,
            message_type=kind,
            seconds=round(seconds, 6),
            threshold_seconds=self._slow_seconds,
        )
        if self._metrics is not None:
            self._metrics.slow_handlers.labels(actor=type(actor).__name__).inc()

    @staticmethod
    def reject(inbox: TwoLaneInbox, envelope: Envelope[Any]) -> None:
        """Answer mail that reached a dead actor, as pykka's teardown would have."""
        if envelope.reply_to is None:
            return
        if isinstance(envelope.message, messages._ActorStop):
            envelope.reply_to.set(None)
            return
        error = ActorDeadError(f"{inbox.actor or 'actor'} stopped before handling the message")
        envelope.reply_to.set_exception(exc_info=(ActorDeadError, error, None))


def _not_running(dispatcher: Dispatcher) -> tuple[type[BaseException], BaseException, None]:
    error = DispatcherNotRunningError(f"dispatcher {dispatcher.name} stopped")
    return DispatcherNotRunningError, error, None
