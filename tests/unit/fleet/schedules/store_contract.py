"""The schedule store's contract, run against the in-memory and the PostgreSQL adapters."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, time, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo

from mowdeck.fleet.schedules.outbox import issue
from mowdeck.fleet.schedules.plan import (
    Restriction,
    ScheduleState,
    decide_due,
    decide_park,
    first_due,
)
from mowdeck.fleet.schedules.ports import Mowers, ScheduleStore, StoredSchedule
from mowdeck.fleet.schedules.slots import Task

__all__ = ["StoreContract", "World"]

BEFORE = datetime(2026, 7, 1, 5, 0, tzinfo=UTC)
START = datetime(2026, 7, 1, 6, 0, tzinfo=UTC)  # 08:00 in Berlin
DAILY = [Task(time(8, 0), 60, frozenset(range(7)), "front")]
ACCOUNT = uuid.UUID("a0c1e2f3-4455-4677-8899-aabbccddeeff")


class World(Protocol):
    """A store and the mowers and sites it refers to."""

    store: ScheduleStore

    async def add_site(self, timezone: str) -> uuid.UUID: ...

    async def add_mower(self, site: uuid.UUID | None) -> uuid.UUID: ...


async def _scheduled(world: World, site: uuid.UUID | None, zone: str | None = None) -> uuid.UUID:
    mower = await world.add_mower(site)
    stored = StoredSchedule(mower, ACCOUNT, True, DAILY, zone, BEFORE)
    tz = ZoneInfo(zone or "Europe/Berlin")
    state = ScheduleState(mower, ACCOUNT, True, DAILY, tz, first_due(DAILY, tz, BEFORE))
    await world.store.put(stored, state)
    return mower


class StoreContract:
    """Subclasses provide a ``world`` fixture."""

    async def test_a_schedule_reads_back_in_its_sites_zone_or_its_own(self, world: World) -> None:
        site = await world.add_site("Europe/Berlin")
        at_site = await _scheduled(world, site)
        alone = await _scheduled(world, None, "America/New_York")
        state = await world.store.get(at_site, BEFORE)
        assert state is not None and state.zone.key == "Europe/Berlin"
        assert state.due is not None and state.due.at == START
        alone_state = await world.store.get(alone, BEFORE)
        assert alone_state is not None and alone_state.zone.key == "America/New_York"
        assert await world.store.get(uuid.uuid4(), BEFORE) is None
        stored = await world.store.stored(at_site)
        assert stored is not None and stored.tasks == DAILY

    async def test_a_claimed_slot_is_recorded_with_its_command_and_not_claimed_again(
        self, world: World
    ) -> None:
        site = await world.add_site("Europe/Berlin")
        mower = await _scheduled(world, site)
        async with world.store.claim_due(START - timedelta(seconds=1), 10) as early:
            assert [s.mower_id for s in early.states if s.mower_id == mower] == []
        async with world.store.claim_due(START, 100) as claim:
            (state,) = [s for s in claim.states if s.mower_id == mower]
            decision = decide_due(state, START)
            assert decision.order is not None
            _, made = issue(
                state, decision.order, issued_by="scheduler", now=START, ttl=timedelta(seconds=30)
            )
            claim.decide(state, decision, made)
        async with world.store.claim_due(START, 100) as again:
            assert [s for s in again.states if s.mower_id == mower] == []
        (slot,) = await world.store.recent_slots(mower, 5)
        assert (slot.state, slot.command_id) == ("started", made.record.command_id)
        assert await world.store.next_due() is not None
        taken_at = START + timedelta(seconds=2)
        owed = await world.store.unpublished(START + timedelta(seconds=1), taken_at, 100)
        assert made.record.command_id in [c for c, _ in owed]
        # Taken once: re-dated to ``now`` for the taker.
        assert made.record.command_id not in [
            c for c, _ in await world.store.unpublished(START + timedelta(seconds=1), taken_at, 100)
        ]
        await world.store.published([made.record.command_id])
        later = await world.store.unpublished(START + timedelta(hours=1), taken_at, 100)
        assert made.record.command_id not in [c for c, _ in later]

    async def test_a_schedule_set_again_never_starts_a_started_slot_twice(
        self, world: World
    ) -> None:
        site = await world.add_site("Europe/Berlin")
        mower = await _scheduled(world, site)
        async with world.store.claim_due(START, 100) as claim:
            for state in claim.states:
                decision = decide_due(state, START)
                assert decision.order is not None
                _, made = issue(
                    state,
                    decision.order,
                    issued_by="scheduler",
                    now=START,
                    ttl=timedelta(seconds=30),
                )
                claim.decide(state, decision, made)
        # Set again mid-slot: its due is the running slot's start once more.
        tz = ZoneInfo("Europe/Berlin")
        now = START + timedelta(minutes=5)
        state = ScheduleState(mower, ACCOUNT, True, DAILY, tz, first_due(DAILY, tz, now))
        await world.store.put(StoredSchedule(mower, ACCOUNT, True, DAILY, None, now), state)
        async with world.store.claim_due(now, 100) as claim:
            (found,) = [s for s in claim.states if s.mower_id == mower]
            assert found.decided == "started"
            decision = decide_due(found, now)
            assert decision.order is None
            claim.decide(found, decision, None)

    async def test_a_restriction_is_stored_with_its_lock_and_read_by_the_sites_mowers(
        self, world: World
    ) -> None:
        site = await world.add_site("Europe/Berlin")
        mower = await _scheduled(world, site)
        rain = Restriction(uuid.uuid4(), site, "rain", START + timedelta(hours=2), BEFORE, "user:a")
        async with world.store.lock(Mowers(site_id=site), BEFORE) as claim:
            assert [s.mower_id for s in claim.states] == [mower]
            claim.restriction = rain
        assert await world.store.restrictions(site, BEFORE) == [rain]
        assert await world.store.restrictions(site, START + timedelta(hours=3)) == []
        state = await world.store.get(mower, BEFORE)
        assert state is not None and state.restriction == rain
        assert await world.store.remove_restriction(site, rain.restriction_id)
        assert not await world.store.remove_restriction(site, rain.restriction_id)

    async def test_a_dock_withdraws_a_start_claimed_ahead_and_sending_skips_it(
        self, world: World
    ) -> None:
        site = await world.add_site("Europe/Berlin")
        mower = await _scheduled(world, site)
        ahead = START - timedelta(seconds=20)
        ttl = timedelta(seconds=30)
        async with world.store.claim_due(ahead, 100, ahead + timedelta(seconds=30)) as claim:
            (state,) = [s for s in claim.states if s.mower_id == mower]
            decision = decide_due(state, START)
            assert decision.order is not None
            _, start = issue(state, decision.order, issued_by="scheduler", now=START, ttl=ttl)
            claim.decide(state, decision, start)
        async with world.store.lock(Mowers(mower_ids=[mower]), ahead) as claim:
            (state,) = claim.states
            parked = decide_park(state, "park_until_further_notice", ahead)
            assert parked.order is not None
            _, dock = issue(state, parked.order, issued_by="user:a", now=ahead, ttl=ttl)
            claim.decide(state, parked, dock)
        ids = [start.record.command_id, dock.record.command_id]
        async with world.store.sending(ids) as sending:
            assert sending.owed == {dock.record.command_id}  # the start was withdrawn
            sending.done.append(dock.record.command_id)
        async with world.store.sending(ids) as sending:
            assert sending.owed == set()
        (slot,) = await world.store.recent_slots(mower, 5)
        assert slot.state == "parked"
