"""The events relay: no event without its change, no change without its event, order, replicas."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import asyncpg
import pytest

from contracts.v1 import Connection, MowerRegistration, decode_event
from contracts.v1.subjects import MSG_ID_HEADER
from mowdeck.fleet.errors import MowerExistsError
from mowdeck.fleet.events_relay import EventsRelay, bus_publisher
from mowdeck.fleet.ports import MowerRecord, RegistryEvent
from mowdeck.fleet.postgres import PostgresMowerRepository
from mowdeck.fleet.rules import registry_event
from mowdeck.kit.bus import Bus, BusError


class Crash(BaseException):
    """The process dies here (not an ``Exception``: nothing may handle it)."""


def one_by_one(bus: Bus, *, crash_after: bool = False):
    async def publish(events: list[RegistryEvent]) -> dict[uuid.UUID, str]:
        for e in events:
            await bus.publish(e.subject, e.body, msg_id=str(e.event_id))
        if crash_after:
            raise Crash
        return {}

    return publish


async def register(
    repo: PostgresMowerRepository, name: str = "M", **options: object
) -> MowerRegistration:
    now = datetime.now(UTC)
    reg = MowerRegistration(
        mower_id=uuid.uuid4(),
        account_id=uuid.uuid4(),
        name=name,
        connection=Connection(kind="simulator", options=options),
    )
    await repo.add(MowerRecord(reg, now, now), registry_event("mower.registered", reg, now=now))
    return reg


async def stream_events(bus: Bus) -> list[tuple[str, str]]:
    """(msg id, mower name) of every event in the stream."""
    info = await bus.js.stream_info("EVENTS")
    if info.state.messages == 0:
        return []
    sub = await bus.js.subscribe("event.>", ordered_consumer=True)
    found = []
    try:
        for _ in range(info.state.messages):
            msg = await sub.next_msg(timeout=2)
            found.append((msg.headers[MSG_ID_HEADER], decode_event(msg.data).payload.name))
    finally:
        await sub.unsubscribe()
    return found


@pytest.fixture
async def repo(pool: asyncpg.Pool) -> PostgresMowerRepository:
    await pool.execute("DELETE FROM fleet_outbox")
    return PostgresMowerRepository(pool)


async def test_a_crash_between_commit_and_publish_still_publishes(
    repo: PostgresMowerRepository, bus: Bus
) -> None:
    reg = await register(repo)  # committed; the process "dies" before any relay ran
    assert await stream_events(bus) == []
    assert (await repo.relay_stats()).pending == 1
    assert await EventsRelay(repo, one_by_one(bus)).drain() == 1  # the next start
    assert [name for _, name in await stream_events(bus)] == [reg.name]
    assert (await repo.relay_stats()).pending == 0


async def test_a_crash_after_publishing_but_before_marking_is_deduplicated(
    repo: PostgresMowerRepository, bus: Bus
) -> None:
    await register(repo, "A")
    with pytest.raises(Crash):
        await EventsRelay(repo, one_by_one(bus, crash_after=True)).relay_once()
    assert (await repo.relay_stats()).pending == 1  # still owed: it was never marked
    assert await EventsRelay(repo, one_by_one(bus)).drain() == 1
    published = await stream_events(bus)
    assert [name for _, name in published] == ["A"]  # JetStream dropped the re-publish


async def test_a_failed_change_leaves_no_event(repo: PostgresMowerRepository, bus: Bus) -> None:
    reg = await register(repo)
    now = datetime.now(UTC)
    with pytest.raises(MowerExistsError):
        await repo.add(MowerRecord(reg, now, now), registry_event("mower.registered", reg, now=now))
    assert (await repo.relay_stats()).pending == 1


async def test_replicas_publish_each_event_once_and_in_commit_order(
    repo: PostgresMowerRepository, bus: Bus
) -> None:
    names = [f"m{i:03d}" for i in range(120)]
    for name in names:
        await register(repo, name)
    relays = [EventsRelay(repo, one_by_one(bus), batch=7, poll_seconds=0.05) for _ in range(3)]
    for relay in relays:
        relay.start()
    try:
        for _ in range(200):
            if (await repo.relay_stats()).pending == 0:
                break
            await asyncio.sleep(0.05)
    finally:
        for relay in relays:
            await relay.stop()
    published = await stream_events(bus)
    assert [name for _, name in published] == names
    assert len({msg_id for msg_id, _ in published}) == len(names)


async def test_an_event_larger_than_the_bus_takes_is_set_aside_and_later_ones_published(
    repo: PostgresMowerRepository, bus: Bus, pool: asyncpg.Pool
) -> None:
    # Registered before options were bounded: its event exceeds NATS's 1 MB max_payload.
    await register(repo, "A")
    huge = await register(repo, "Huge", blob="x" * (bus.nc.max_payload + 1))
    await register(repo, "C")
    relay = EventsRelay(repo, bus_publisher(bus))
    assert await asyncio.wait_for(relay.drain(), timeout=10) == 3
    assert [name for _, name in await stream_events(bus)] == ["A", "C"]
    stats = await repo.relay_stats()
    assert (stats.pending, stats.set_aside) == (0, 1)
    row = await pool.fetchrow(
        "SELECT failed_at, error, published_at FROM fleet_outbox"
        " WHERE convert_from(body, 'UTF8')::jsonb #>> '{payload,mower_id}' = $1",
        str(huge.mower_id),
    )
    assert row["failed_at"] is not None
    assert row["published_at"] is None
    assert "max_payload" in row["error"]
    # Later events of any account still go out.
    await register(repo, "D")
    assert await relay.drain() == 1
    assert [name for _, name in await stream_events(bus)] == ["A", "C", "D"]


async def test_a_lost_ack_fails_the_round_and_frees_the_claim(
    repo: PostgresMowerRepository, bus: Bus
) -> None:
    await register(repo, "A")
    # No stream takes event.> any more, but someone listens: no ack, and no "no responders".
    await bus.js.delete_stream("EVENTS")
    listener = await bus.nc.subscribe("event.>")
    try:
        relay = EventsRelay(repo, bus_publisher(bus, ack_timeout=0.3))
        with pytest.raises(BusError):
            await asyncio.wait_for(relay.relay_once(), timeout=5)
        # The claim, its row locks and the relay lock were released with the transaction.
        async with repo.claim_unpublished(10) as claim:
            assert claim is not None
            assert len(claim.events) == 1
    finally:
        await listener.unsubscribe()
    await bus.ensure_streams()
    assert await relay.drain() == 1
    assert [name for _, name in await stream_events(bus)] == ["A"]
