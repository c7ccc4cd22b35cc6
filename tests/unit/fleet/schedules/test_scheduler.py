"""The scheduler's rounds on the in-memory store with a recording publisher."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

from prometheus_client import CollectorRegistry

from contracts.v1 import CommandEnvelope
from mowdeck.fleet.schedules.memory import MemoryScheduleStore, MemorySiteDirectory
from mowdeck.fleet.schedules.plan import ScheduleState, first_due
from mowdeck.fleet.schedules.ports import StoredSchedule
from mowdeck.fleet.schedules.scheduler import Scheduler, SchedulerSettings
from mowdeck.fleet.schedules.slots import Task

BERLIN = ZoneInfo("Europe/Berlin")
SPRING = [Task(time(2, 30), 60, frozenset({6}))]  # Sunday 02:30, in the skipped hour once a year
ACCOUNT = uuid.uuid4()


class Recorder:
    def __init__(self, clock: Clock) -> None:
        self.sent: list[tuple[datetime, CommandEnvelope]] = []
        self.clock = clock

    async def publish(self, envelope: CommandEnvelope, body: bytes) -> None:
        self.sent.append((self.clock(), envelope))


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


async def _store(now: datetime) -> tuple[MemoryScheduleStore, uuid.UUID]:
    sites = MemorySiteDirectory()
    store = MemoryScheduleStore(sites)
    site, mower = uuid.uuid4(), uuid.uuid4()
    sites.sites[site] = (ACCOUNT, "Europe/Berlin")
    sites.mowers[mower] = site
    state = ScheduleState(mower, ACCOUNT, True, SPRING, BERLIN, first_due(SPRING, BERLIN, now))
    await store.put(StoredSchedule(mower, ACCOUNT, True, SPRING, None, now), state)
    return store, mower


async def test_the_spring_forward_start_runs_once_at_three_and_ends_an_hour_later() -> None:
    clock = Clock(datetime(2026, 3, 28, 12, 0, tzinfo=UTC))
    store, mower = await _store(clock.now)
    recorder = Recorder(clock)
    scheduler = Scheduler(store, recorder, SchedulerSettings(), CollectorRegistry(), clock=clock)
    three_cest = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    for minutes in range(0, 24 * 60, 15):  # a day in steps, over the change
        clock.now = datetime(2026, 3, 28, 12, 0, tzinfo=UTC) + timedelta(minutes=minutes)
        await scheduler.run_once()
    kinds = [(e.kind, e.issued_at) for _, e in recorder.sent]
    assert kinds == [
        ("start_mow", three_cest),
        ("return_to_dock", three_cest + timedelta(minutes=60)),
    ]
    assert {e.mower_id for _, e in recorder.sent} == {mower}
    assert store.outbox == {}


async def test_a_start_claimed_ahead_is_published_at_its_start() -> None:
    start = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    clock = Clock(start - timedelta(seconds=0.2))
    store, _ = await _store(clock.now - timedelta(hours=1))
    recorder = Recorder(Clock(start))
    settings = SchedulerSettings(lead_seconds=30.0)
    scheduler = Scheduler(store, recorder, settings, CollectorRegistry(), clock=clock)
    assert await scheduler.run_once() == 1
    assert recorder.sent == []  # committed, not yet sent
    await scheduler.drain()  # sleeps 0.2 s by the clock
    ((_, envelope),) = recorder.sent
    assert (envelope.kind, envelope.issued_at, envelope.issued_by) == (
        "start_mow",
        start,
        "scheduler",
    )
    assert store.outbox == {}
