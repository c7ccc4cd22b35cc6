"""Tasks that nobody awaits, kept referenced until they are done.

The event loop holds only weak references to its tasks: a task started and not kept may
be collected before it finishes. A service that starts work in the background (a device
send, a publish, a ping) keeps it in a ``BackgroundTasks``, which forgets each task once
it is done and lets shutdown wait for what is left or cancel it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

__all__ = ["BackgroundTasks"]


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

    async def finish(self) -> None:
        """Until every task kept now has ended, whatever its outcome."""
        await asyncio.gather(*self._tasks, return_exceptions=True)
