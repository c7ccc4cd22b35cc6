"""Callbacks ahead of the loop's queue, and eager tasks."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from mowdeck.kit.loop_scheduling import call_first_threadsafe, eager_task, run_realtime


async def test_a_first_call_runs_before_everything_already_ready() -> None:
    loop = asyncio.get_running_loop()
    order: list[str] = []
    done = asyncio.Event()

    def ordinary(i: int) -> None:
        order.append(f"ordinary-{i}")
        if i == 0:
            # Scheduled while a turn is under way, from another thread: it must not wait
            # for the other 99 callbacks of this turn.
            t = threading.Thread(target=call_first_threadsafe, args=(loop, order.append, "stop"))
            t.start()
            t.join()
        if i == 99:
            done.set()

    for i in range(100):
        loop.call_soon(ordinary, i)
    await done.wait()
    assert order[0] == "ordinary-0"
    assert order[1] == "stop"
    assert order[2:] == [f"ordinary-{i}" for i in range(1, 100)]


async def test_a_first_call_wakes_an_idle_loop() -> None:
    loop = asyncio.get_running_loop()
    woke = asyncio.Event()
    threading.Thread(target=call_first_threadsafe, args=(loop, woke.set)).start()
    await asyncio.wait_for(woke.wait(), 1.0)


async def test_an_eager_task_runs_up_to_its_first_wait_at_once() -> None:
    loop = asyncio.get_running_loop()
    steps: list[str] = []
    gate: asyncio.Future[int] = loop.create_future()

    async def work() -> int:
        steps.append("before")
        value = await gate
        steps.append("after")
        return value * 2

    task = eager_task(work())
    assert steps == ["before"]  # ran inside the call, no loop turn needed
    gate.set_result(21)
    assert await task == 42
    assert steps == ["before", "after"]


async def test_an_eager_task_that_never_waits_is_done_at_once() -> None:
    async def quick() -> str:
        return "sent"

    fut = eager_task(quick())
    assert fut.done()
    assert fut.result() == "sent"


async def test_an_eager_task_carries_exceptions_from_either_part() -> None:
    loop = asyncio.get_running_loop()

    async def fails_at_once() -> None:
        raise ValueError("at once")

    with pytest.raises(ValueError, match="at once"):
        await eager_task(fails_at_once())

    gate: asyncio.Future[None] = loop.create_future()

    async def fails_later() -> None:
        try:
            await gate
        except KeyError as err:
            raise ValueError("later") from err

    task = eager_task(fails_later())
    gate.set_exception(KeyError("device"))
    with pytest.raises(ValueError, match="later"):
        await task


async def test_an_eager_task_survives_bare_yields_and_sees_cancelled_futures() -> None:
    loop = asyncio.get_running_loop()
    inner: asyncio.Future[None] = loop.create_future()

    async def work() -> str:
        await asyncio.sleep(0)
        try:
            await inner
        except asyncio.CancelledError:
            return "saw the cancelled future"
        return "no"

    task = eager_task(work())
    await asyncio.sleep(0)
    inner.cancel()
    assert await task == "saw the cancelled future"


async def test_cancelling_an_eager_task_cancels_the_coroutine_where_it_waits() -> None:
    loop = asyncio.get_running_loop()
    gate: asyncio.Future[None] = loop.create_future()
    cleaned = asyncio.Event()

    async def work() -> None:
        try:
            await gate
        finally:
            cleaned.set()

    task = eager_task(work())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned.is_set()


@pytest.mark.parametrize("priority", [0, 100, -1])
def test_a_realtime_priority_outside_1_to_99_is_refused(priority: int) -> None:
    with pytest.raises(ValueError, match="1 to 99"):
        run_realtime(priority)


def test_realtime_refused_by_the_kernel_is_a_reason_and_the_thread_stays_ordinary(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[tuple[int, int, int]] = []

    def refuse(pid: int, policy: int, param: os.sched_param) -> None:
        asked.append((pid, policy, param.sched_priority))
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    answer: list[str | None] = []
    thread = threading.Thread(target=lambda: answer.append(run_realtime(5)))
    thread.start()
    thread.join()
    assert asked == [(0, os.SCHED_FIFO, 5)]  # the calling thread, FIFO, that priority
    assert answer == ["Operation not permitted (needs CAP_SYS_NICE or RLIMIT_RTPRIO >= 5)"]
