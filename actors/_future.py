"""A pykka future that can also call back when it is settled (for the asyncio bridge)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import structlog
from pykka import ThreadingFuture

if TYPE_CHECKING:
    from pykka._future import GetHookFunc
    from pykka._types import OptExcInfo

__all__ = ["DispatcherFuture"]

T = TypeVar("T")

_log = structlog.get_logger("actors.future")


class DispatcherFuture(ThreadingFuture[T]):
    """`pykka.ThreadingFuture` plus `add_done_callback`, so a waiter need not block.

    Blocking `get()` still works for threads that may block (tests, CLI, other
    services' worker threads). The event loop uses `add_done_callback` instead, through
    `LoopBridge`.
    """

    def __init__(self) -> None:
        super().__init__()
        self._done_callbacks: list[Callable[[DispatcherFuture[T]], object]] | None = []

    def set(self, value: Any | None = None) -> None:
        """Set the value and run the done callbacks."""
        super().set(value)
        self._run_done_callbacks()

    def set_exception(self, exc_info: OptExcInfo | None = None) -> None:
        """Set an exception (default: the one being handled) and run the done callbacks."""
        # Read sys.exc_info() here: inside the callbacks it would be a different one.
        super().set_exception(exc_info if exc_info is not None else sys.exc_info())
        self._run_done_callbacks()

    def set_get_hook(self, func: GetHookFunc[T]) -> None:
        """Refuse a get hook once callbacks wait: a hook never settles them."""
        with self._condition:
            if self._done_callbacks:
                msg = "a future with done callbacks cannot take a get hook"
                raise TypeError(msg)
            super().set_get_hook(func)

    def done(self) -> bool:
        """Tell whether a value or an exception has been set."""
        return self._result is not None

    def add_done_callback(self, callback: Callable[[DispatcherFuture[T]], object]) -> None:
        """Call `callback(self)` once settled, on the settling thread (now, if settled)."""
        with self._condition:
            if self._get_hook is not None:
                # map()/join()/filter() futures compute their value inside get(); nothing
                # would ever run the callback.
                msg = "a future with a get hook has no completion to wait for"
                raise TypeError(msg)
            if self._result is None and self._done_callbacks is not None:
                self._done_callbacks.append(callback)
                return
        callback(self)

    def _run_done_callbacks(self) -> None:
        with self._condition:
            callbacks, self._done_callbacks = self._done_callbacks, None
        for callback in callbacks or ():
            try:
                callback(self)
            except Exception:
                # The setter is usually an actor's worker: a broken waiter must not fail it.
                _log.exception("actors.future_callback_failed")
