"""Every asyncio task's stack, printed when a test is about to hit its timeout.

pytest-timeout prints the stacks of the threads; a test stuck in an ``await`` shows
only its event loop waiting in ``select``, not which coroutine waits for what. A watchdog
thread, started for each test, asks every running event loop (thread-safely) to print
its tasks' stacks to stderr shortly before the timeout, so the failure's report says
where each task was.
"""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import Callable
from threading import Event, Thread

__all__ = ["dump_tasks_after"]


def dump_tasks_after(seconds: float) -> Callable[[], None]:
    """Print every running loop's tasks after ``seconds``; call the result to call it off."""
    done = Event()

    def watch() -> None:
        if done.wait(seconds):
            return
        loops = [o for o in gc.get_objects() if isinstance(o, asyncio.BaseEventLoop)]
        for loop in loops:
            if loop.is_running() and not loop.is_closed():
                loop.call_soon_threadsafe(_print_tasks, loop)

    thread = Thread(target=watch, name="task-dump", daemon=True)
    thread.start()

    def call_off() -> None:
        # Joined, not only told: a thread still ending while the next test runs frees its
        # objects under that test (one counting the collector's objects saw it).
        done.set()
        thread.join()

    return call_off


def _print_tasks(loop: asyncio.AbstractEventLoop) -> None:
    print(f"\n+++ asyncio tasks of {loop!r} +++", file=sys.stderr)
    for task in asyncio.all_tasks(loop):
        print(f"--- {task!r}", file=sys.stderr)
        task.print_stack(file=sys.stderr)
    sys.stderr.flush()
