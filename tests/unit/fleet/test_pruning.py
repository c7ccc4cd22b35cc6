"""The pruner: cutoffs from the settings and the clock, skipped rounds, counted rows."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry

from mowdeck.fleet.memory import InMemoryCommandLog, InMemoryMowerRepository, InMemoryPruning
from mowdeck.fleet.ports import CommandRecord, RegistryEvent
from mowdeck.fleet.pruning import Pruner
from mowdeck.fleet.settings import FleetSettings

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


async def test_a_round_deletes_commands_older_than_the_setting_and_counts_them() -> None:
    log = InMemoryCommandLog()
    ages = {"8 days": timedelta(days=8), "6 days": timedelta(days=6), "2 days": timedelta(days=2)}
    records = {
        name: CommandRecord(
            uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), "pause_mow", "user:a", NOW - age, NOW
        )
        for name, age in ages.items()
    }
    await log.record(list(records.values()), [])
    pruning = InMemoryPruning(InMemoryMowerRepository(), log)
    registry = CollectorRegistry()
    pruner = Pruner(
        pruning, FleetSettings(fleet_command_retention_days=3), registry, clock=lambda: NOW
    )

    pruning.locked = True  # another replica is pruning
    assert await pruner.run_once() is None
    assert len(log.commands) == 3

    pruning.locked = False
    deleted = await pruner.run_once()
    assert deleted is not None
    assert deleted["fleet_commands"] == 2
    assert list(log.commands) == [records["2 days"].command_id]
    counted = registry.get_sample_value(
        "mowdeck_fleet_pruned_rows_total", {"table": "fleet_commands"}
    )
    assert counted == 2


async def test_the_defaults_keep_published_events_a_day_and_commands_a_week() -> None:
    log, repo = InMemoryCommandLog(), InMemoryMowerRepository()
    commands = {
        days: CommandRecord(
            uuid.uuid4(),
            uuid.uuid4(),
            uuid.uuid4(),
            "pause_mow",
            "user:a",
            NOW - timedelta(days=days),
            NOW,
        )
        for days in (8, 6)
    }
    await log.record(list(commands.values()), [])
    published = {
        hours: RegistryEvent(uuid.uuid4(), "event.mower.updated", b"{}", NOW - timedelta(days=2))
        for hours in (25, 23)
    }
    repo.events = [(event, NOW - timedelta(hours=hours)) for hours, event in published.items()]
    pruner = Pruner(
        InMemoryPruning(repo, log), FleetSettings(), CollectorRegistry(), clock=lambda: NOW
    )
    await pruner.run_once()
    assert list(log.commands) == [commands[6].command_id]
    assert [event.event_id for event, _ in repo.events] == [published[23].event_id]
