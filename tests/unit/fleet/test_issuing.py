"""The command journal (batches, failures per batch) and the publisher (headers, timeouts)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from structlog.contextvars import get_contextvars

from contracts.v1 import CommandEnvelope, CommandResult, decode_command
from contracts.v1.commands import EmergencyStop, PauseMow
from contracts.v1.subjects import MSG_ID_HEADER, PRIORITY_HEADER
from mowdeck.fleet.issuing import CommandJournal, CommandPublisher
from mowdeck.fleet.memory import InMemoryCommandLog
from mowdeck.fleet.ports import CommandRecord
from mowdeck.fleet.rules import encode_command
from mowdeck.kit.bus import BusError, ExpiredCommandError
from mowdeck.kit.logging import bound
from tests.support.fakes import FakeBus

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def command() -> CommandRecord:
    return CommandRecord(uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), "pause_mow", "user:a", NOW, NOW)


class SlowLog(InMemoryCommandLog):
    """Counts writes, takes a while for each and fails while ``failing`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[int] = []
        self.failing = False

    async def record(
        self, commands: Sequence[CommandRecord], results: Sequence[CommandResult]
    ) -> None:
        self.writes.append(len(commands))
        failing = self.failing  # decided when the write starts
        await asyncio.sleep(0.01)
        if failing:
            raise OSError("database gone")
        await super().record(commands, results)


async def test_concurrent_commands_share_writes_and_return_once_stored() -> None:
    log = SlowLog()
    journal = CommandJournal(log, batch=50)
    commands = [command() for _ in range(120)]
    await asyncio.gather(*(journal.record(c) for c in commands))
    assert sum(log.writes) == 120
    assert max(log.writes) == 50  # the batch limit holds
    assert len(log.writes) <= 4  # 120 requests, a handful of statements
    assert set(log.commands) == {c.command_id for c in commands}


async def test_a_failed_write_fails_its_batch_only() -> None:
    log = SlowLog()
    journal = CommandJournal(log)
    log.failing = True
    first = [asyncio.create_task(journal.record(command())) for _ in range(3)]
    while not log.writes:  # the first batch is being written
        await asyncio.sleep(0)
    log.failing = False
    later = command()
    await journal.record(later)
    outcomes = await asyncio.gather(*first, return_exceptions=True)
    assert all(isinstance(o, OSError) for o in outcomes)
    assert list(log.commands) == [later.command_id]
    await journal.stop()


class NotingLog(InMemoryCommandLog):
    """Notes what is bound in the writer when it writes."""

    def __init__(self) -> None:
        super().__init__()
        self.bound: list[dict[str, object]] = []

    async def record(
        self, commands: Sequence[CommandRecord], results: Sequence[CommandResult]
    ) -> None:
        self.bound.append(get_contextvars())
        await super().record(commands, results)


async def test_the_journal_s_writer_logs_as_the_service_not_as_the_request_that_started_it() -> (
    None
):
    log = NotingLog()
    journal = CommandJournal(log)
    with bound(service="fleet", mower_id="m1", command_id="c1", account_id="a1"):
        await journal.record(command())
    assert log.bound == [{"service": "fleet"}]
    await journal.stop()


def envelope(now: datetime, *, stop: bool = False, ttl: float = 30) -> CommandEnvelope:
    return CommandEnvelope.issue(
        mower_id=uuid.uuid4(),
        account_id=uuid.uuid4(),
        command=EmergencyStop(reason="test") if stop else PauseMow(),
        issued_by="user:a",
        now=now,
        ttl=timedelta(seconds=ttl),
    )


@pytest.mark.parametrize(("stop", "priority"), [(False, "normal"), (True, "emergency")])
async def test_a_command_goes_out_with_its_id_and_priority(stop: bool, priority: str) -> None:
    bus = FakeBus()
    publisher = CommandPublisher(bus, clock=lambda: NOW)  # type: ignore[arg-type]
    sent = envelope(NOW, stop=stop)
    await publisher.publish(sent, encode_command(sent))
    # A stop is announced for the gateways' emergency lanes first (docs/gateway.md).
    subjects = [f"emergency.mower.{sent.mower_id}"] if stop else []
    assert [m.subject for m in bus.published] == [*subjects, f"command.mower.{sent.mower_id}"]
    for out in bus.published:
        assert out.headers == {MSG_ID_HEADER: str(sent.command_id), PRIORITY_HEADER: priority}
        assert decode_command(out.data) == sent
    await publisher.stop()


async def test_an_expired_command_is_refused_before_publishing() -> None:
    bus = FakeBus()
    later = NOW + timedelta(seconds=2)
    publisher = CommandPublisher(bus, clock=lambda: later)  # type: ignore[arg-type]
    sent = envelope(NOW, ttl=1)
    with pytest.raises(ExpiredCommandError):
        await publisher.publish(sent, encode_command(sent))
    assert bus.published == []


async def test_a_missing_acknowledgement_fails_after_the_timeout_and_frees_the_ack() -> None:
    bus = FakeBus(answer=None)  # no ack ever comes
    publisher = CommandPublisher(bus, clock=lambda: NOW, ack_timeout=0.2)  # type: ignore[arg-type]
    sent = envelope(NOW)
    started = asyncio.get_running_loop().time()
    with pytest.raises(BusError):
        await publisher.publish(sent, encode_command(sent))
    assert 0.2 <= asyncio.get_running_loop().time() - started < 1.0
    assert publisher._jetstream.in_flight == 0  # the failed ack is forgotten
    await publisher.stop()
