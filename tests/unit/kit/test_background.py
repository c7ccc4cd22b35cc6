"""BackgroundTasks: kept until done, waited for, cancelled; cancel_and_wait ends a task."""

from __future__ import annotations

import asyncio

from structlog.testing import capture_logs

from mowdeck.kit.background import BackgroundTasks, cancel_and_wait


async def test_a_task_is_kept_until_it_is_done() -> None:
    tasks = BackgroundTasks()
    gate = asyncio.Event()
    task = tasks.spawn(gate.wait())
    assert len(tasks) == 1
    gate.set()
    await tasks.wait(timeout=1)
    assert task.done()
    await asyncio.sleep(0)  # the done callback runs on the next turn
    assert len(tasks) == 0


async def test_a_future_already_done_is_not_kept() -> None:
    tasks = BackgroundTasks()
    done = asyncio.get_running_loop().create_future()
    done.set_result(None)
    tasks.track(done)
    assert len(tasks) == 0


async def test_wait_gives_up_after_its_timeout_and_cancel_ends_them() -> None:
    tasks = BackgroundTasks()
    forever = tasks.spawn(asyncio.Event().wait())
    await tasks.wait(timeout=0.01)
    assert not forever.done()
    tasks.cancel()
    await tasks.finish()
    assert forever.cancelled()


async def _swallowing_first_cancel(cancels: list[int], resumed: asyncio.Event) -> None:
    # As nats-py's publish does while it waits for its buffer to be flushed: the first
    # cancellation is caught and the coroutine carries on to its next wait.
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        cancels.append(1)
    resumed.set()
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        cancels.append(2)
        raise


async def test_a_task_that_swallows_a_cancellation_carries_on_after_a_plain_cancel() -> None:
    # Why cancel_and_wait exists: cancel() once, and the task is still running after it
    # got to its next wait, the point a plain ``await task`` would wait at for ever.
    cancels: list[int] = []
    resumed = asyncio.Event()
    task = asyncio.create_task(_swallowing_first_cancel(cancels, resumed))
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.wait_for(resumed.wait(), timeout=5.0)
    assert not task.done()
    assert cancels == [1]
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_cancel_and_wait_cancels_again_until_the_task_has_ended() -> None:
    cancels: list[int] = []
    task = asyncio.create_task(_swallowing_first_cancel(cancels, asyncio.Event()))
    await asyncio.sleep(0)
    assert await cancel_and_wait(task, timeout=5.0)
    assert task.cancelled()
    assert cancels == [1, 2]


async def test_cancel_and_wait_gives_up_after_its_timeout_and_says_so() -> None:
    release = asyncio.Event()
    cancels = 0

    async def refusing() -> None:
        nonlocal cancels
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                cancels += 1

    task = asyncio.create_task(refusing(), name="refusing")
    await asyncio.sleep(0)
    with capture_logs() as logs:
        assert not await cancel_and_wait(task, timeout=0.3, every=0.05)
    assert not task.done()
    assert cancels > 1  # asked again while it ran, not once
    said = [(e["event"], e["task"]) for e in logs]
    assert said == [("task did not end when cancelled", "refusing")]
    release.set()
    await asyncio.wait_for(task, timeout=5.0)


async def test_cancel_and_wait_takes_what_the_task_raised_and_a_task_already_done() -> None:
    async def failing() -> None:
        raise OSError("gone")

    task = asyncio.create_task(failing())
    await asyncio.sleep(0)
    assert task.done()
    assert await cancel_and_wait(task)
    assert await cancel_and_wait(None)


async def test_finish_ends_tasks_that_swallow_a_cancellation() -> None:
    tasks = BackgroundTasks()
    cancels: list[int] = []
    task = tasks.spawn(_swallowing_first_cancel(cancels, asyncio.Event()))
    await asyncio.sleep(0)
    await asyncio.wait_for(tasks.finish(), timeout=5.0)  # cancels them itself
    assert task.cancelled()
    assert cancels == [1, 2]


async def test_a_cancelled_task_s_own_cleanup_is_not_cancelled_again_within_the_interval() -> None:
    cleaned = asyncio.Event()

    async def with_cleanup() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0.2)  # a cleanup that waits, shorter than the interval
            cleaned.set()

    task = asyncio.create_task(with_cleanup())
    await asyncio.sleep(0)
    assert await cancel_and_wait(task, timeout=5.0, every=1.0)
    assert cleaned.is_set()
    assert task.cancelled()

    hurried = asyncio.create_task(with_cleanup())
    cleaned.clear()
    await asyncio.sleep(0)
    assert await cancel_and_wait(hurried, timeout=5.0, every=0.05)
    assert not cleaned.is_set()  # cancelled again inside its cleanup: why the interval
