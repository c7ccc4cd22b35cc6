"""Tasks that nobody awaits, kept referenced until they are done.

The event loop holds only weak references to its tasks: a task started and not kept may
be collected before it finishes. A service that starts work in the background (a device
send, a publish, a ping) keeps it in a ``BackgroundTasks``, which forgets each task once
it is done and lets shutdown wait for what is left or cancel it.

``cancel_and_wait`` ends one task for good. A coroutine may swallow a cancellation and
carry on (nats-py's ``_flush_pending`` catches ``CancelledError`` while a publish waits
for its write buffer to be flushed); a plain ``task.cancel()`` followed by awaiting the
task then waits for ever, and a shutdown with it. It cancels again until the task has
ended, and gives up, logged, after a bound.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import structlog

__all__ = ["BackgroundTasks", "cancel_and_wait"]

log = structlog.get_logger("mowdeck.background")

# How long a cancelled task has before it is cancelled again: its own cleanup (a
# ``finally`` that awaits) runs undisturbed for this long; a swallowed cancellation costs
# at most this much.
RECANCEL_SECONDS = 1.0


async def cancel_and_wait(
    task: asyncio.Future[Any] | None,
    *,
    timeout: float = 10.0,
    name: str | None = None,
    every: float = RECANCEL_SECONDS,
) -> bool:
    """Cancel ``task`` and wait until it has ended; False if it had not after ``timeout``.

    The cancellation is repeated every ``every`` seconds while the task goes on, so a
    task that swallowed one still ends at the next. What the task raised or returned is
    discarded (its own end). A task still running after ``timeout`` seconds is logged with
    ``name`` (the task's own name when not given) and left cancelled: the caller's
    shutdown goes on instead of waiting for it. A caller cancelled while waiting is
    cancelled at once; the task keeps its cancellation.
    """
    if task is None:
        return True
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not task.done():
        task.cancel()
        remaining = deadline - loop.time()
        if remaining <= 0:
            label = name or (task.get_name() if isinstance(task, asyncio.Task) else repr(task))
            log.error("task did not end when cancelled", task=label, timeout_s=timeout)
            return False
        await asyncio.wait({task}, timeout=min(every, remaining))
    if not task.cancelled():
        task.exception()  # retrieved: its end is not reported as never retrieved
    return True


class BackgroundTasks:
    """A set of tasks and futures, each kept until it is done."""

    __slots__ = ("_tasks",)

    def __init__(self) -> None:
        self._tasks: set[asyncio.Future[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``coro`` as a task on the running loop, kept until it is done."""
        task = asyncio.get_running_loop().create_task(coro)
        self.track(task)
        return task

    def track(self, future: asyncio.Future[Any]) -> None:
        """Keep ``future`` (a task started elsewhere) until it is done."""
        if not future.done():
            self._tasks.add(future)
            future.add_done_callback(self._tasks.discard)

    def __len__(self) -> int:
        return len(self._tasks)

    async def wait(self, timeout: float) -> None:
        """Until every task kept now is done, or ``timeout`` seconds."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)

    def cancel(self) -> None:
        """Cancel every task kept (``finish`` waits for them to end)."""
        for task in list(self._tasks):
            task.cancel()

    async def finish(self, timeout: float = 10.0) -> None:
        """Cancel every task kept now and wait until each has ended (``cancel_and_wait``)."""
        await asyncio.gather(*(cancel_and_wait(t, timeout=timeout) for t in list(self._tasks)))
