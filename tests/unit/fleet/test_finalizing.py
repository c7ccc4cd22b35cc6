"""The finalizer: every overdue command in a round, however many batches that takes."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry

from mowdeck.fleet.finalizing import Finalizer
from mowdeck.fleet.memory import InMemoryCommandLog
from mowdeck.fleet.ports import UNANSWERED_REASON, CommandRecord
from mowdeck.fleet.settings import FleetSettings

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def command(expires: datetime) -> CommandRecord:
    issued = expires - timedelta(seconds=30)
    return CommandRecord(
        uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), "pause_mow", "u", issued, expires
    )


async def test_a_round_finalizes_every_overdue_command_and_counts_them() -> None:
    log = InMemoryCommandLog()
    overdue = [command(NOW - timedelta(seconds=31)) for _ in range(1234)]
    within_grace = command(NOW - timedelta(seconds=29))
    await log.record([*overdue, within_grace], [])
    registry = CollectorRegistry()
    finalizer = Finalizer(log, FleetSettings(), registry, clock=lambda: NOW)
    assert await finalizer.run_once() == len(overdue)
    assert registry.get_sample_value("mowdeck_fleet_commands_unanswered_total") == len(overdue)
    _, statuses = await log.lookup(overdue[-1].command_id)
    assert [(s.status, s.reason, s.at) for s in statuses] == [("failed", UNANSWERED_REASON, NOW)]
    assert (await log.lookup(within_grace.command_id))[1] == []
    assert await finalizer.run_once() == 0
