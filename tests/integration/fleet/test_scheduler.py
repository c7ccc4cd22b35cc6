"""The scheduler on real PostgreSQL and NATS: replicas racing, a replica killed between
its claim and its publish. Commands are counted as the bus carried them."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, time, timedelta
from typing import Any

import asyncpg
import pytest
from prometheus_client import CollectorRegistry

from contracts.v1 import CommandEnvelope, decode_command
from mowdeck.fleet.issuing import CommandPublisher
from mowdeck.fleet.schedules.outbox import issue, publish_all
from mowdeck.fleet.schedules.plan import Restriction, dock_for_restriction
from mowdeck.fleet.schedules.ports import Mowers, Sending
from mowdeck.fleet.schedules.postgres import ClaimMode, PostgresScheduleStore
from mowdeck.fleet.schedules.scheduler import Scheduler, SchedulerSettings
from mowdeck.fleet.schedules.slots import Task
from mowdeck.kit.bus import Bus
from tests.support.schedules import add_site, seed_mowers, seed_schedules

BEFORE = datetime(2026, 7, 1, 5, 0, tzinfo=UTC)  # 07:00 in Berlin
START = datetime(2026, 7, 1, 6, 0, tzinfo=UTC)  # 08:00 in Berlin
DAILY = [Task(time(8, 0), 60, frozenset(range(7)), "front")]


class Clock:
    """A clock the test moves."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class Seen:
    """Every command message the bus carried (a core subscription sees repeats that
    JetStream deduplicates), synchronised by a sentinel published after them."""

    def __init__(self) -> None:
        self.envelopes: list[CommandEnvelope] = []
        self.sentinel = asyncio.Event()

    async def on(self, msg: Any) -> None:
        if msg.subject == "test.sentinel":
            self.sentinel.set()
        else:
            self.envelopes.append(decode_command(msg.data))

    def kinds(self, kind: str) -> list[CommandEnvelope]:
        return [e for e in self.envelopes if e.kind == kind]


@pytest.fixture
async def seen(bus: Bus) -> AsyncIterator[Callable[[], Any]]:
    record = Seen()
    sub = await bus.nc.subscribe("command.mower.>", cb=record.on)
    # Outside the COMMANDS stream; one connection's messages arrive in order.
    sentinel = await bus.nc.subscribe("test.sentinel", cb=record.on)

    async def settled() -> Seen:
        record.sentinel.clear()
        await bus.nc.publish("test.sentinel", b"{}")
        await asyncio.wait_for(record.sentinel.wait(), 10)
        return record

    yield settled
    await sub.unsubscribe()
    await sentinel.unsubscribe()


async def _fleet(pool: asyncpg.Pool, count: int) -> list[uuid.UUID]:
    account = uuid.uuid4()
    site = await add_site(pool, account, "Europe/Berlin", BEFORE)
    mowers = await seed_mowers(pool, account, [site], count, BEFORE)
    await seed_schedules(pool, account, mowers, DAILY, "Europe/Berlin", BEFORE)
    return mowers


def _scheduler(
    pool: asyncpg.Pool, bus: Bus, clock: Clock, mode: ClaimMode = "skip_locked", **kw: Any
) -> Scheduler:
    settings = SchedulerSettings(batch=kw.pop("batch", 40), republish_seconds=10.0)
    publisher = kw.pop("publisher", None) or CommandPublisher(bus, clock=clock)
    return Scheduler(
        PostgresScheduleStore(pool, mode=mode),
        publisher,
        settings,
        CollectorRegistry(),
        clock=clock,
    )


async def _stored(bus: Bus) -> int:
    """The commands the COMMANDS stream stored (deduplicated)."""
    info = await bus.js.stream_info("COMMANDS")
    return int(info.state.messages)


@pytest.mark.parametrize("mode", ["skip_locked", "advisory"])
async def test_two_replicas_racing_start_every_slot_once_and_end_it_once(
    pool: asyncpg.Pool, bus: Bus, seen: Callable[[], Any], mode: ClaimMode
) -> None:
    await pool.execute("TRUNCATE fleet_mowers CASCADE")
    mowers = await _fleet(pool, 300)
    clock = Clock(START + timedelta(seconds=1))
    pools = [await asyncpg.create_pool(pool._connect_args[0], min_size=2, max_size=4) for _ in "ab"]
    try:
        replicas = [_scheduler(p, bus, clock, mode) for p in pools]
        # Each replica runs rounds at once, several times: every slot is due to both.
        await asyncio.gather(*(r.run_once() for r in replicas for _ in range(3)))
        record = await seen()
        starts = record.kinds("start_mow")
        assert len(starts) == len(mowers)  # every publish, repeats included
        assert {e.mower_id for e in starts} == set(mowers)
        assert {e.issued_by for e in starts} == {"scheduler"}
        assert {e.command.duration_min for e in starts} == {60}  # type: ignore[union-attr]
        clock.now = START + timedelta(minutes=60)
        await asyncio.gather(*(r.run_once() for r in replicas for _ in range(2)))
        record = await seen()
        assert len(record.kinds("return_to_dock")) == len(mowers)
        assert len(record.kinds("start_mow")) == len(mowers)
    finally:
        for p in pools:
            await p.close()
    audit = await pool.fetch(
        "SELECT kind, count(*) AS n, count(DISTINCT mower_id) AS m FROM fleet_audit_commands"
        " WHERE issued_by = 'scheduler' AND mower_id = ANY($1::uuid[]) GROUP BY kind ORDER BY kind",
        mowers,
    )
    assert [(r["kind"], r["n"], r["m"]) for r in audit] == [
        ("return_to_dock", 300, 300),
        ("start_mow", 300, 300),
    ]
    assert await _stored(bus) == 600


class Stuck:
    """A publisher that never returns: its replica is killed while it waits."""

    def __init__(self) -> None:
        self.called = asyncio.Event()

    async def publish(self, envelope: CommandEnvelope, body: bytes) -> None:
        self.called.set()
        await asyncio.Event().wait()


async def test_a_replica_killed_between_claim_and_publish_starts_nothing_twice(
    pool: asyncpg.Pool, bus: Bus, seen: Callable[[], Any]
) -> None:
    await pool.execute("TRUNCATE fleet_mowers CASCADE")
    await pool.execute("TRUNCATE fleet_schedule_outbox")
    mowers = await _fleet(pool, 50)
    clock = Clock(START + timedelta(seconds=1))
    stuck = Stuck()
    doomed = _scheduler(pool, bus, clock, publisher=stuck, batch=100)
    task = asyncio.create_task(doomed.run_once())
    await asyncio.wait_for(stuck.called.wait(), 10)
    task.cancel()  # killed after its commit, before any publish completed
    with pytest.raises(asyncio.CancelledError):
        await task
    survivor = _scheduler(pool, bus, clock)
    await survivor.run_once()  # within the lease: the slots are decided, nothing is sent
    assert (await seen()).envelopes == []
    clock.now += timedelta(seconds=11)
    await survivor.run_once()
    await survivor.run_once()
    starts = (await seen()).kinds("start_mow")
    assert len(starts) == len(mowers)
    assert {e.mower_id for e in starts} == set(mowers)
    assert await pool.fetchval("SELECT count(*) FROM fleet_schedule_outbox") == 0


class Forgetful(PostgresScheduleStore):
    """A store whose replica dies after publishing, before it forgets the outbox rows."""

    @asynccontextmanager
    async def sending(self, command_ids: Any) -> AsyncIterator[Sending]:
        async with super().sending(command_ids) as sending:
            yield sending
            raise asyncio.CancelledError  # the transaction that forgets them is rolled back


async def test_a_replica_killed_after_publishing_is_repeated_under_the_same_ids(
    pool: asyncpg.Pool, bus: Bus, seen: Callable[[], Any]
) -> None:
    await pool.execute("TRUNCATE fleet_mowers CASCADE")
    await pool.execute("TRUNCATE fleet_schedule_outbox")
    mowers = await _fleet(pool, 20)
    clock = Clock(START + timedelta(seconds=1))
    settings = SchedulerSettings(batch=100, republish_seconds=10.0)
    doomed = Scheduler(
        Forgetful(pool),
        CommandPublisher(bus, clock=clock),
        settings,
        CollectorRegistry(),
        clock=clock,
    )
    with pytest.raises(asyncio.CancelledError):
        await doomed.run_once()
    clock.now += timedelta(seconds=11)
    await _scheduler(pool, bus, clock).run_once()
    record = await seen()
    starts = record.kinds("start_mow")
    # Published twice under one id each: JetStream stored each command once.
    assert len(starts) == 2 * len(mowers)
    assert len({e.command_id for e in starts}) == len(mowers)
    assert await _stored(bus) == len(mowers)


async def test_a_start_claimed_ahead_goes_out_at_its_slot_unless_a_restriction_withdrew_it(
    pool: asyncpg.Pool, bus: Bus, seen: Callable[[], Any]
) -> None:
    await pool.execute("TRUNCATE fleet_mowers CASCADE")
    await pool.execute("TRUNCATE fleet_schedule_outbox")
    account = uuid.uuid4()
    dry = await add_site(pool, account, "Europe/Berlin", BEFORE)
    wet = await add_site(pool, account, "Europe/Berlin", BEFORE)
    dry_mowers = await seed_mowers(pool, account, [dry], 5, BEFORE)
    wet_mowers = await seed_mowers(pool, account, [wet], 5, BEFORE)
    await seed_schedules(pool, account, dry_mowers + wet_mowers, DAILY, "Europe/Berlin", BEFORE)
    clock = Clock(START - timedelta(seconds=1))
    settings = SchedulerSettings(batch=100, lead_seconds=30.0)
    store = PostgresScheduleStore(pool)
    publisher = CommandPublisher(bus, clock=clock)
    scheduler = Scheduler(store, publisher, settings, CollectorRegistry(), clock=clock)
    assert await scheduler.run_once() == 10  # committed a second ahead of 08:00
    assert (await seen()).envelopes == []  # and not sent before it
    now = clock()
    rain = Restriction(uuid.uuid4(), wet, "rain", START + timedelta(hours=2), now, "user:a")
    docks = []
    async with store.lock(Mowers(site_id=wet), now) as claim:
        claim.restriction = rain
        for state in claim.states:
            decision = dock_for_restriction(state, rain, now)
            assert decision.order is not None
            envelope, made = issue(
                state, decision.order, issued_by="user:a", now=now, ttl=timedelta(seconds=30)
            )
            docks.append((envelope, made.body))
            claim.decide(state, decision, made)
    await publish_all(publisher, store, docks)
    await scheduler.drain()
    record = await seen()
    assert {e.mower_id for e in record.kinds("start_mow")} == set(dry_mowers)
    assert len(record.kinds("start_mow")) == len(dry_mowers)
    assert {e.mower_id for e in record.kinds("return_to_dock")} == set(wet_mowers)
    assert {e.issued_at for e in record.kinds("start_mow")} == {START}
    assert await pool.fetchval("SELECT count(*) FROM fleet_schedule_outbox") == 0
