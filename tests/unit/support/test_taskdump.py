"""The stacks of a stuck test's tasks, printed before its timeout."""

from __future__ import annotations

import asyncio

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
