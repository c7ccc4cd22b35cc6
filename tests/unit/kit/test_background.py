"""BackgroundTasks: kept until done, waited for, cancelled."""

from __future__ import annotations

import asyncio

from mowdeck.kit.background import BackgroundTasks


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
