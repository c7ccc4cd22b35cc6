"""The stacks of a stuck test's tasks, printed before its timeout."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tests.support.eventually import eventually
from tests.support.taskdump import dump_tasks_after


async def _waits_for_ever(never: asyncio.Event) -> None:
    await never.wait()


async def test_a_waiting_task_s_stack_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    never = asyncio.Event()
    task = asyncio.create_task(_waits_for_ever(never), name="stuck")
    call_off = dump_tasks_after(0.05)
    printed: list[str] = []
    try:

        def seen() -> bool:
            printed.append(capsys.readouterr().err)
            return "_waits_for_ever" in "".join(printed)

        await eventually(seen, 5.0)
    finally:
        call_off()
        task.cancel()
    assert "name='stuck'" in "".join(printed)


async def test_called_off_it_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    call_off = dump_tasks_after(0.05)
    call_off()
    # Called off before its time, the first can never print; a second one, due at once,
    # is the sentinel: what it printed shows what this loop was given.
    dump_tasks_after(0.0)
    printed: list[str] = []

    def seen() -> bool:
        printed.append(capsys.readouterr().err)
        return "+++ asyncio tasks" in "".join(printed)

    await eventually(seen, 5.0)
    assert "".join(printed).count("+++ asyncio tasks") == 1


def test_called_off_its_thread_has_ended_when_the_call_returns() -> None:
    before = {t for t in threading.enumerate() if t.name == "task-dump"}
    call_off = dump_tasks_after(60.0)
    assert {t for t in threading.enumerate() if t.name == "task-dump"} - before
    call_off()
    assert not {t for t in threading.enumerate() if t.name == "task-dump"} - before
