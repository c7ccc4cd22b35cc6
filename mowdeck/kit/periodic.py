"""A round of work repeated on a timer, for housekeeping such as retention and pruning."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Callable

import structlog

from mowdeck.kit.background import cancel_and_wait

__all__ = ["Periodic"]

log = structlog.get_logger("mowdeck.periodic")


class Periodic:
    """Runs ``round_()`` every ``interval`` seconds (the first after one interval), and at
    once after ``wake()``.

    ``round_`` is a coroutine function, or a plain function for a round that does not
    wait (it then runs inside the timer's task, without a task step of its own). A failed
    round is logged and the next one runs on time; ``stop()`` cancels a round in
    progress, so each round must leave what it committed consistent. Wakes that come while
    a round runs ask for one more round after it, not one each; a woken round does not
    put off the next timed one.
    """

    def __init__(self, name: str, interval: float, round_: Callable[[], object]):
        self.name = name
        self.interval = interval
        self._round = round_
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """Run a round now (after the one running, if any)."""
        self._wake.set()

    def start(self) -> None:
        """Start the timer (idempotent)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop(), name=self.name)

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The timer's task while it runs (for a ``/healthz`` watch)."""
        return self._task

    async def stop(self) -> None:
        """Stop the timer."""
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time() + self.interval
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(0.0, due - loop.time()))
            self._wake.clear()
            timed = loop.time() >= due
            try:
                result = self._round()
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("periodic round failed", task=self.name)
            if timed:
                # An interval after the round that was due; a woken round moves nothing.
                due = loop.time() + self.interval
