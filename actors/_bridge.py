"""The asyncio bridge: effects from actors to the loop, answers from actors to the loop.

pykka's `Future.__await__` yields once and then calls the blocking `get()`, which stalls
the whole event loop until the actor answers. The bridge never blocks: a
`DispatcherFuture` calls back on the actor's worker when it is settled, and the callback
hands the result to the loop with `loop.call_soon_threadsafe`; calls that arrive while one
is on its way share its wake-up.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar, TypeVarTuple

import pykka
import structlog

from actors._future import DispatcherFuture
from actors._inbox import TwoLaneInbox

__all__ = ["LoopBridge"]

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

_log = structlog.get_logger("actors.bridge")
_DRAIN_SLICE = 1000


class LoopBridge:
    """Connects actors (on dispatcher workers) with one asyncio event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._calls: deque[tuple[Callable[..., object], tuple[Any, ...]]] = deque()
        self._scheduled = False

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop effects are handed to."""
        return self._loop

    def call_soon(self, fn: Callable[[*Ts], object], *args: *Ts) -> None:
        """Run `fn(*args)` on the loop soon, in call order; safe from any thread, never blocks.

        Calls made while a drain is already scheduled join it: a thousand answers from
        the workers wake the loop once, not a thousand times (each wake-up is a write to
        the loop's self-pipe, a system call, and a turn of the loop).
        """
        # Append first, then check: a drain that already cleared the flag will either see
        # this call or be followed by the drain scheduled here (deque appends are atomic).
        self._calls.append((fn, args))
        # A drain scheduled on a loop closed since will never run: not a reason to wait.
        if self._scheduled and not self._loop.is_closed():
            return
        self._scheduled = True
        try:
            self._loop.call_soon_threadsafe(self._drain)
        except RuntimeError:
            # The loop is closed: the service is shutting down and nobody is left to
            # perform the effect. Raising would fail the actor for it, so log and drop
            # (one at a time: a call another thread appends meanwhile is logged too).
            self._scheduled = False
            while True:
                try:
                    dropped_fn, _ = self._calls.popleft()
                except IndexError:
                    break
                _log.warning(
                    "actors.effect_dropped", reason="event loop closed", fn=repr(dropped_fn)
                )

    def _drain(self) -> None:
        self._scheduled = False
        calls = self._calls
        try:
            # A bounded slice per loop turn: a burst of answers must not hold the loop.
            for _ in range(_DRAIN_SLICE):
                if not calls:
                    return
                fn, args = calls.popleft()
                try:
                    fn(*args)
                except (SystemExit, KeyboardInterrupt):
                    raise
                except BaseException as error:
                    # What the loop does for a failing callback: report it, run the rest.
                    self._loop.call_exception_handler(
                        {"message": f"Exception in callback {fn!r}", "exception": error}
                    )
        finally:
            if calls and not self._scheduled:
                self._scheduled = True
                self._loop.call_soon(self._drain)

    def wrap(self, future: pykka.Future[T]) -> asyncio.Future[T]:
        """Return an asyncio future (of this loop) settled when the pykka future is.

        Call it on the loop's thread. Only futures of `DispatcherActor`s (from `ask`
        with `block=False` or from proxy calls) can be awaited this way.
        """
        if not isinstance(future, DispatcherFuture):
            msg = (
                f"cannot await {type(future).__name__} without blocking the loop; "
                "only futures from DispatcherActor asks and proxies can be bridged"
            )
            raise TypeError(msg)
        waiter: asyncio.Future[T] = self._loop.create_future()

        def settled(done: DispatcherFuture[T]) -> None:
            self.call_soon(_transfer, done, waiter)

        future.add_done_callback(settled)
        return waiter

    async def ask(
        self,
        actor_ref: pykka.ActorRef[Any],
        message: Any,
        timeout: float | None = None,
    ) -> Any:
        """Send `message` and wait for the answer without blocking the loop.

        An exception raised by the handler is raised here; `TimeoutError` if no answer
        came within `timeout` seconds (the message may still be handled later).
        """
        waiter = self.wrap(actor_ref.ask(message, block=False))
        return await asyncio.wait_for(waiter, timeout)

    async def wait_stopped(self, actor_ref: pykka.ActorRef[Any]) -> BaseException | None:
        """Wait until the actor has stopped; return the failure that stopped it, or None."""
        inbox = _inbox_of(actor_ref)
        waiter: asyncio.Future[BaseException | None] = self._loop.create_future()

        def stopped(failure: BaseException | None) -> None:
            self.call_soon(_settle_quietly, waiter, failure)

        inbox.add_termination_callback(stopped)
        return await waiter

    async def stop(self, actor_ref: pykka.ActorRef[Any]) -> bool:
        """Stop the actor after the mail already queued; True if it was alive to stop."""
        was_alive = actor_ref.is_alive()
        actor_ref.stop(block=False)
        await self.wait_stopped(actor_ref)
        return was_alive


def _inbox_of(actor_ref: pykka.ActorRef[Any]) -> TwoLaneInbox:
    inbox = actor_ref.actor_inbox
    if not isinstance(inbox, TwoLaneInbox):
        msg = f"{actor_ref} is not a DispatcherActor"
        raise TypeError(msg)
    return inbox


def _transfer(done: DispatcherFuture[T], waiter: asyncio.Future[T]) -> None:
    if waiter.done():  # the awaiting task was cancelled or timed out
        return
    try:
        value = done.get(timeout=0)  # settled already: get() returns at once
    except Exception as error:
        waiter.set_exception(error)
    else:
        waiter.set_result(value)


def _settle_quietly(waiter: asyncio.Future[T], value: T) -> None:
    if not waiter.done():
        waiter.set_result(value)
