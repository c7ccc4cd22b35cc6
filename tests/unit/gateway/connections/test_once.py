"""One outcome per command id: concurrent and later sends of an id are not carried out again."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from mowdeck.gateway.connections.once import CommandOnce
from mowdeck.gateway.connections.port import CommandOutcome


def _timed_out(seconds: float) -> Exception:
    return TimeoutError(f"no outcome in {seconds} s")


async def test_a_send_of_an_id_under_way_waits_for_its_outcome_and_a_later_one_remembers() -> None:
    once, calls = CommandOnce(), []
    release = asyncio.Event()

    async def carry_out(_: asyncio.Future[CommandOutcome]) -> CommandOutcome:
        calls.append(1)
        await release.wait()
        return CommandOutcome("executed", "done")

    cid = uuid.uuid4()
    first = asyncio.ensure_future(once.run(cid, carry_out, timeout=5, timed_out=_timed_out))
    second = asyncio.ensure_future(once.run(cid, carry_out, timeout=5, timed_out=_timed_out))
    await asyncio.sleep(0)
    release.set()
    assert await first == await second == CommandOutcome("executed", "done")
    assert calls == [1]
    assert once.known(cid) == CommandOutcome("executed", "done")


async def test_a_failure_reaches_the_waiting_send_and_nothing_is_remembered() -> None:
    once = CommandOnce()
    release = asyncio.Event()

    async def carry_out(_: asyncio.Future[CommandOutcome]) -> CommandOutcome:
        await release.wait()
        raise ConnectionError("the link went down")

    cid = uuid.uuid4()
    first = asyncio.ensure_future(once.run(cid, carry_out, timeout=5, timed_out=_timed_out))
    second = asyncio.ensure_future(once.run(cid, carry_out, timeout=5, timed_out=_timed_out))
    await asyncio.sleep(0)
    release.set()
    for sent in (first, second):
        with pytest.raises(ConnectionError, match="went down"):
            await sent
    assert once.known(cid) is None


async def test_only_the_latest_outcomes_are_remembered() -> None:
    once = CommandOnce(remembered=2)
    ids = [uuid.uuid4() for _ in range(3)]

    async def carry_out(_: asyncio.Future[CommandOutcome]) -> CommandOutcome:
        return CommandOutcome("executed", "")

    for cid in ids:
        await once.run(cid, carry_out, timeout=1, timed_out=_timed_out)
    assert [once.known(cid) is not None for cid in ids] == [False, True, True]
