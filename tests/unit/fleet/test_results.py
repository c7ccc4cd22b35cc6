"""The result recorder: what can never be stored is terminated, the rest of its batch kept."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

from structlog.contextvars import get_contextvars

from contracts.v1 import CommandResult, encode
from mowdeck.fleet.errors import UnstorableError
from mowdeck.fleet.memory import InMemoryCommandLog
from mowdeck.fleet.ports import CommandRecord
from mowdeck.fleet.results import ResultRecorder
from tests.support.fakes import FakeMsg

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def delivered(result: CommandResult) -> FakeMsg:
    """``result`` as the recorder gets it from the stream."""
    return FakeMsg(encode(result), f"command.result.mower.{result.mower_id}")


def result(reason: str | None = None) -> CommandResult:
    return CommandResult(
        command_id=uuid.uuid4(), mower_id=uuid.uuid4(), status="failed", at=NOW, reason=reason
    )


class PickyLog(InMemoryCommandLog):
    """Refuses, like a database, every batch holding a result with ``refused`` as reason;
    fails every write while ``down``; notes what was bound for the logs at each write."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []
        self.bound: list[dict[str, object]] = []
        self.down = False

    async def record(
        self, commands: Sequence[CommandRecord], results: Sequence[CommandResult]
    ) -> None:
        self.batches.append(len(results))
        self.bound.append(get_contextvars())
        if self.down:
            raise OSError("database gone")
        if any(r.reason == "refused" for r in results):
            raise UnstorableError("value out of range")
        await super().record(commands, results)


async def flushed(log: InMemoryCommandLog, results: list[CommandResult]) -> list[FakeMsg]:
    recorder = ResultRecorder(object(), log, batch=100)  # type: ignore[arg-type]
    msgs = [delivered(r) for r in results]
    for msg in msgs:
        await recorder._on_message(msg)  # type: ignore[arg-type]
    await recorder.stop()  # flushes what is pending (the consumer never started)
    return msgs


async def test_a_result_with_a_nul_character_is_terminated_and_its_batch_recorded() -> None:
    log = PickyLog()
    good, nul, other = result("blade jammed"), result("jam\u0000med"), result()
    msgs = await flushed(log, [good, nul, other])
    assert [m.outcome for m in msgs] == ["ack", "term", "ack"]
    assert set(log.statuses) == {good.command_id, other.command_id}
    assert log.batches == [2]  # checked before the insert: one statement


async def test_a_batch_the_database_refuses_is_recorded_one_by_one() -> None:
    log = PickyLog()
    good, refused, other = result(), result("refused"), result("ok")
    msgs = await flushed(log, [good, refused, other])
    assert [m.outcome for m in msgs] == ["ack", "term", "ack"]
    assert set(log.statuses) == {good.command_id, other.command_id}
    assert log.batches == [3, 1, 1, 1]


async def test_a_database_that_is_down_gets_the_batch_redelivered() -> None:
    log = PickyLog()
    log.down = True
    msgs = await flushed(log, [result(), result()])
    assert [m.outcome for m in msgs] == ["nak", "nak"]


async def test_recorded_one_by_one_each_write_logs_naming_its_mower_and_command() -> None:
    log = PickyLog()
    good, refused = result(), result("refused")
    await flushed(log, [good, refused])
    assert log.bound == [
        {},  # the batch: about no one result
        {"mower_id": good.mower_id, "command_id": good.command_id},
        {"mower_id": refused.mower_id, "command_id": refused.command_id},
    ]
