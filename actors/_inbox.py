"""Two-lane inbox: emergency mail first, then normal mail, each lane in arrival order.

The inbox is where an actor and its dispatcher meet, and it imports neither: it calls
its dispatcher through `Scheduler` and carries its actor, for the dispatcher's workers,
as a `RunnableActor`. `Dispatcher` and `DispatcherActor` satisfy them.
"""

from __future__ import annotations

import queue
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from actors._states import DEAD, IDLE, NEW, READY_NORMAL, RUNNING

if TYPE_CHECKING:
    import threading
    from _thread import LockType
    from types import TracebackType

    from pykka import ActorRef
    from pykka._envelope import Envelope

__all__ = [
    "Emergency",
    "RunnableActor",
    "Scheduler",
    "TerminationCallback",
    "TwoLaneInbox",
    "is_emergency",
]

TerminationCallback = Callable[[BaseException | None], None]
"""Called once when an actor has stopped: with the failure that stopped it, or None."""


class Scheduler(Protocol):
    """What an inbox needs of the dispatcher that runs its actor."""

    @property
    def lock(self) -> LockType:
        """The lock under which scheduling states change."""
        ...

    def take_lock(self) -> None:
        """Acquire `lock` without joining a lock convoy."""
        ...

    def make_ready(self, inbox: TwoLaneInbox, *, emergency: bool) -> None:
        """Queue an idle actor to run (caller holds `lock`)."""
        ...

    def hint_emergency(self, inbox: TwoLaneInbox) -> None:
        """Flag an actor that just got emergency mail (called without `lock`)."""
        ...

    def reject(self, inbox: TwoLaneInbox, envelope: Envelope[Any]) -> None:
        """Answer mail that reached a dead actor."""
        ...


class RunnableActor(Protocol):
    """The actor as a dispatcher's worker runs it: pykka's loop, one step at a time."""

    actor_urn: str

    @property
    def actor_stopped(self) -> threading.Event:
        """Set once the actor has stopped."""
        ...

    @property
    def actor_ref(self) -> ActorRef[Any]:
        """The actor's reference."""
        ...

    def _actor_loop_setup(self) -> None: ...

    def _receive_envelope(self, envelope: Envelope[Any]) -> None: ...

    def _handle_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None: ...


class Emergency:
    """Base or mixin for message classes that take the emergency lane."""

    __slots__ = ()
    emergency: ClassVar[bool] = True


def is_emergency(message: object) -> bool:
    """Tell whether a message takes the emergency lane (its class says `emergency = True`)."""
    # A getattr on the type, not the instance: one dict lookup chain, no per-message state.
    return getattr(type(message), "emergency", False) is True


class TwoLaneInbox:
    """An actor's mailbox with an emergency and a normal lane.

    It satisfies pykka's inbox protocol (`put`, `get`, `empty`), but `get` never blocks:
    the dispatcher, not a thread per actor, decides when the actor runs. All scheduling
    state is changed under the dispatcher's lock; the lanes are deques, so a worker may
    pop from them without the lock while producers append.
    """

    __slots__ = (
        "_callbacks",
        "actor",
        "dispatcher",
        "emergency",
        "failure",
        "normal",
        "started",
        "state",
    )

    def __init__(self) -> None:
        self.emergency: deque[Envelope[Any]] = deque()
        self.normal: deque[Envelope[Any]] = deque()
        self.state: int = NEW
        self.started = False
        self.failure: BaseException | None = None
        self.actor: RunnableActor | None = None
        self.dispatcher: Scheduler | None = None
        self._callbacks: list[TerminationCallback] | None = []

    def bind(self, actor: RunnableActor, dispatcher: Scheduler) -> None:
        """Attach the inbox to its actor and dispatcher (done once, in the actor's init)."""
        self.actor = actor
        self.dispatcher = dispatcher

    def put(self, envelope: Envelope[Any], /) -> None:
        """Queue an envelope in its lane and make the actor runnable."""
        # This is the hottest path of the runtime (every tell and ask): the dispatcher's
        # scheduling is inlined here rather than called, to save a call per message.
        emergency = getattr(type(envelope.message), "emergency", False) is True
        dispatcher = self.dispatcher
        if dispatcher is None:  # pragma: no cover - bind() runs inside __init__
            msg = "inbox is not bound to a dispatcher"
            raise RuntimeError(msg)
        if emergency:
            # Lock-free on purpose: an emergency must never queue behind the dispatcher's
            # lock, which a worker may hold while it waits for the GIL (that convoy cost
            # milliseconds). The deque appends are atomic; a worker claims the actor
            # from the hint it finds in the emergency ready queue.
            if self.state == DEAD:
                dispatcher.reject(self, envelope)
                return
            self.emergency.append(envelope)
            dispatcher.hint_emergency(self)
            return
        # Append first, then read the state, both without the lock. If the actor is
        # ready or running, the worker that runs it will see this envelope: a worker
        # that finds the lanes empty sets IDLE and then looks at the lanes again (see
        # Dispatcher._end_turn), so under the GIL either it sees the envelope or this sees
        # IDLE. Only the idle -> ready change (and NEW/DEAD) takes the lock. Taking it
        # for every tell made the producer and the workers convoy on it.
        normal = self.normal
        normal.append(envelope)
        if READY_NORMAL <= self.state <= RUNNING:
            return
        dispatcher.take_lock()
        try:
            state = self.state
            if state != DEAD:
                if state == IDLE and normal:
                    dispatcher.make_ready(self, emergency=False)
                return
        finally:
            dispatcher.lock.release()
        # Dead: the teardown drains the lanes after it sets DEAD, and may have answered
        # this envelope already. Exactly one of it and this remove() gets the envelope.
        try:
            normal.remove(envelope)  # Envelope compares by identity
        except ValueError:
            return
        dispatcher.reject(self, envelope)

    def get(self) -> Envelope[Any]:
        """Take the next envelope, emergency lane first; raise `queue.Empty` if none."""
        try:
            return self.emergency.popleft()
        except IndexError:
            pass
        try:
            return self.normal.popleft()
        except IndexError:
            raise queue.Empty from None

    def empty(self) -> bool:
        """Tell whether both lanes are empty."""
        return not (self.emergency or self.normal)

    def depth(self) -> tuple[int, int]:
        """Return the number of queued messages as (normal, emergency)."""
        return len(self.normal), len(self.emergency)

    def add_termination_callback(self, callback: TerminationCallback) -> None:
        """Call `callback(failure_or_None)` once the actor has stopped (now, if it has)."""
        dispatcher = self.dispatcher
        if dispatcher is not None:
            with dispatcher.lock:
                callbacks = self._callbacks
                if callbacks is not None:
                    callbacks.append(callback)
                    return
        callback(self.failure)

    def take_termination_callbacks(self) -> list[TerminationCallback]:
        """Close the callback list and return it (caller holds the dispatcher lock)."""
        callbacks = self._callbacks or []
        self._callbacks = None
        return callbacks
