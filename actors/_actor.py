"""`DispatcherActor`: a pykka actor that runs on a shared `Dispatcher`, not its own thread."""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any

import structlog
from pykka import Actor, ActorRef, ActorRegistry

from actors._future import DispatcherFuture
from actors._inbox import TwoLaneInbox

if TYPE_CHECKING:
    from types import TracebackType

    from pykka import Future
    from pykka._actor import ActorInbox
    from pykka._envelope import Envelope

    from actors._dispatcher import Dispatcher

__all__ = ["DispatcherActor", "StopFlag"]

_log = structlog.get_logger("actors.actor")


class StopFlag(threading.Event):
    """`threading.Event` for `actor_stopped` that shares its dispatcher's Condition.

    pykka only reads it (`is_set`) on every tell/ask and sets it once; nobody usually
    waits on it. A Condition per actor cost more than the rest of the actor.
    """

    _cond: threading.Condition
    _flag: bool

    def __init__(self, condition: threading.Condition) -> None:  # no super(): see above
        self._cond = condition
        self._flag = False

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the flag is set or `timeout` passes; return the flag."""
        # The Condition is shared, so a notify may be for another flag: re-check.
        with self._cond:
            return self._cond.wait_for(lambda: self._flag, timeout)


class DispatcherActor(Actor):
    """A pykka actor whose messages are run by a `Dispatcher`'s worker pool.

    Subclass it like `pykka.ThreadingActor`; pass the dispatcher as a keyword::

        class Watch(DispatcherActor):
            def __init__(self, *, dispatcher: Dispatcher, mower_id: str) -> None:
                super().__init__(dispatcher=dispatcher)
                self.mower_id = mower_id

        ref = Watch.start(dispatcher=dispatcher, mower_id="m-1")

    `tell`, `ask`, proxies, `ActorRegistry` and the `on_*` hooks behave as in pykka.
    `on_start` runs on a worker before any message; one message runs at a time per
    actor. Handlers must not block or do I/O: they hold one of a few shared workers. Do
    not call a blocking `ask(...)`/`get()` from a handler either: the answer may need the
    worker you are holding.
    """

    def __init__(self, *_args: Any, dispatcher: Dispatcher, **_kwargs: Any) -> None:
        # Refuse before pykka registers the actor, so a refused actor leaves no trace.
        dispatcher.check_accepting()
        # The fields pykka.Actor.__init__ (4.x) sets, set here without calling it: it
        # would spend a urandom syscall and a Condition per actor, which at 10,000 actors
        # was most of the start time. tests/unit/actors checks the pykka contract.
        self.actor_urn = dispatcher.new_urn()
        inbox = TwoLaneInbox()
        self.actor_inbox = inbox
        self.actor_stopped = StopFlag(dispatcher.stop_condition)
        self._actor_ref = ActorRef(self)
        self._dispatcher = dispatcher
        inbox.bind(self, dispatcher)
        self._two_lane_inbox = inbox

    @property
    def dispatcher(self) -> Dispatcher:
        """The dispatcher this actor runs on."""
        return self._dispatcher

    @staticmethod
    def _create_actor_inbox() -> ActorInbox:
        return TwoLaneInbox()  # __init__ makes its own; kept for pykka's abstract API

    @staticmethod
    def _create_future() -> Future[Any]:
        return DispatcherFuture()

    def _start_actor_loop(self) -> None:
        self._dispatcher.schedule_start(self._two_lane_inbox)

    def _handle_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # Remember the first failure: a supervisor restarts on it, a clean stop does not.
        inbox = self._two_lane_inbox
        if inbox.failure is None:
            inbox.failure = exception_value or RuntimeError("actor failed")
        super()._handle_failure(exception_type, exception_value, traceback)

    def _receive_envelope(self, envelope: Envelope[Any]) -> None:
        """Handle one envelope exactly as pykka's actor loop body does."""
        try:
            response = self._handle_receive(envelope.message)
            if envelope.reply_to is not None:
                envelope.reply_to.set(response)
        except Exception:
            if envelope.reply_to is not None:
                # Like pykka: an exception in an ask goes to the caller; the actor lives.
                _log.debug("actors.ask_raised", actor=str(self), exc_info=True)
                envelope.reply_to.set_exception()
            else:
                exc_info = sys.exc_info()
                self._handle_failure(*exc_info)
                try:
                    self.on_failure(*exc_info)
                except Exception:
                    self._handle_failure(*sys.exc_info())
        except BaseException:
            # pykka stops every actor on SystemExit/KeyboardInterrupt in a handler. It may
            # block there because it owns its thread; a shared worker must not, or the
            # stops it waits for could never run.
            _log.critical("actors.base_exception", actor=str(self), exc_info=True)
            self._stop()
            ActorRegistry.stop_all(block=False)
