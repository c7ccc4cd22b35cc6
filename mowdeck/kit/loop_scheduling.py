"""Getting one callback ahead of everything else an event loop has to do.

asyncio runs ready callbacks first come, first served, and a loop turn runs every
callback that was ready when it began. Under load a turn holds hundreds of them (a
socket read per busy connection, a task step per message), so a callback scheduled with
``call_soon_threadsafe`` waits for the rest of the turn and often the next: tens to
hundreds of milliseconds. That is the wrong order for an emergency stop.

- ``call_first_threadsafe`` puts a callback at the front of the loop's ready queue from
  any thread: it runs as soon as the callback running now returns.
- ``eager_task`` runs a coroutine at once, up to its first real suspension, and only the
  rest as a task (what Python 3.12 calls an eager task): a send that needs no waiting
  happens inside the calling callback instead of a turn later.
- ``run_realtime`` gives the calling thread a real-time scheduling policy (``SCHED_FIFO``):
  on a machine whose cores are all busy, the thread runs as soon as it wakes, ahead of
  every ordinarily scheduled thread, instead of waiting for a time slice.
"""

from __future__ import annotations

import asyncio
import collections
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["call_first_threadsafe", "eager_task", "run_realtime"]

T = TypeVar("T")


def call_first_threadsafe(
    loop: asyncio.AbstractEventLoop, callback: Callable[..., object], *args: Any
) -> None:
    """Schedule ``callback(*args)`` on ``loop`` ahead of every callback already ready.

    Safe from any thread (a deque's ``appendleft`` is atomic, and the loop is woken as
    ``call_soon_threadsafe`` wakes it). On a loop without a ready deque (not asyncio's
    own) it falls back to ``call_soon_threadsafe``. Several callbacks put first before the
    loop gets to them run last in, first out (stops of different mowers do not care).
    """
    ready = getattr(loop, "_ready", None)
    wake = getattr(loop, "_write_to_self", None)
    if not isinstance(ready, collections.deque) or wake is None or loop.is_closed():
        loop.call_soon_threadsafe(callback, *args)
        return
    ready.appendleft(asyncio.Handle(callback, args, loop))
    wake()


def eager_task(coro: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
    """Run ``coro`` now up to its first suspension; the rest continues as a task.

    Call on the loop. The returned future has the coroutine's result (or exception), as
    a task would; cancelling it cancels the coroutine where it waits.
    """
    loop = asyncio.get_running_loop()
    try:
        yielded = coro.send(None)
    except StopIteration as stop:
        done: asyncio.Future[T] = loop.create_future()
        done.set_result(stop.value)
        return done
    except BaseException as err:  # the task would have carried it; so does the future
        failed: asyncio.Future[T] = loop.create_future()
        failed.set_exception(err)
        return failed
    return loop.create_task(_resume(coro, yielded))


async def _resume(coro: Coroutine[Any, Any, T], yielded: Any) -> T:
    # Drive the rest of a coroutine started by hand, as a task would: wait for what it
    # waits for, then resume it. Resuming a coroutine suspended on a future makes the
    # future's ``__await__`` return its result or raise its exception inside ``coro``.
    while True:
        try:
            if yielded is None:
                await asyncio.sleep(0)  # a bare yield: give the loop a turn
            else:
                # What a task does with a future its coroutine yields: take the
                # "blocking" mark the future's ``__await__`` set, then wait for it.
                yielded._asyncio_future_blocking = False
                await yielded
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                # This task was cancelled: cancel the coroutine where it waits.
                try:
                    yielded = coro.throw(asyncio.CancelledError())
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]
                continue
            # Only the awaited future was cancelled: ``coro`` sees that when resumed.
        except BaseException:  # noqa: S110 - ``coro`` sees the outcome when resumed
            pass
        try:
            yielded = coro.send(None)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]


def run_realtime(priority: int) -> str | None:
    """Schedule the calling thread ``SCHED_FIFO`` at ``priority`` (1-99); None when done.

    Otherwise the reason it could not be (the process lacks ``CAP_SYS_NICE`` and an
    ``RLIMIT_RTPRIO`` of at least ``priority``, or the platform has no such policy), and
    the thread keeps its ordinary scheduling. Only for a thread that sleeps nearly all
    the time and does little when woken: a real-time thread that kept a core busy would
    take it from everything else (the kernel leaves ordinary threads 5 % of each second,
    ``kernel.sched_rt_runtime_us``).
    """
    if not 1 <= priority <= 99:
        raise ValueError(f"a real-time priority is 1 to 99, not {priority}")
    setscheduler = getattr(os, "sched_setscheduler", None)
    fifo = getattr(os, "SCHED_FIFO", None)
    if setscheduler is None or fifo is None:
        return "this platform has no SCHED_FIFO"
    try:
        setscheduler(0, fifo, os.sched_param(priority))  # 0: the calling thread on Linux
    except OSError as err:  # PermissionError (EPERM) without the capability or rlimit
        return f"{err.strerror or err} (needs CAP_SYS_NICE or RLIMIT_RTPRIO >= {priority})"
    return None
