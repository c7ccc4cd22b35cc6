"""The outbox: no event without its change, no change without its event, order, replicas."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import asyncpg
import pytest

from contracts.v1 import Connection, MowerRegistration, decode_event
from contracts.v1.subjects import MSG_ID_HEADER
from mowdeck.fleet.errors import MowerExistsError
from mowdeck.fleet.outbox import OutboxRelay
from mowdeck.fleet.ports import MowerRecord, OutboxEvent
from mowdeck.fleet.postgres import PostgresMowerRepository
from mowdeck.fleet.registry import outbox_event
from mowdeck.kit.bus import Bus


class Crash(BaseException):
    """The process dies here (not an ``Exception``: nothing may handle it)."""


def bus_publisher(bus: Bus, *, crash_after: bool = False):
    async def publish(events: list[OutboxEvent]) -> None:
        for e in events:
            await bus.publish(e.subject, e.body, msg_id=str(e.event_id))
        if crash_after:
            raise Crash

    return publish


async def register(repo: PostgresMowerRepository, name: str = "M") -> MowerRegistration:
    now = datetime.now(UTC)
    reg = MowerRegistration(
        mower_id=uuid.uuid4(),
        account_id=uuid.uuid4(),
        name=name,
        connection=Connection(kind="simulator"),
    )
    await repo.add(MowerRecord(reg, now, now), outbox_event("mower.registered", reg, now=now))
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
    assert (await repo.outbox_stats()).pending == 1
    assert await OutboxRelay(repo, bus_publisher(bus)).drain() == 1  # the next start
    assert [name for _, name in await stream_events(bus)] == [reg.name]
    assert (await repo.outbox_stats()).pending == 0


async def test_a_crash_after_publishing_but_before_marking_is_deduplicated(
    repo: PostgresMowerRepository, bus: Bus
) -> None:
    await register(repo, "A")
    with pytest.raises(Crash):
        await OutboxRelay(repo, bus_publisher(bus, crash_after=True)).relay_once()
    assert (await repo.outbox_stats()).pending == 1  # still owed: it was never marked
    assert await OutboxRelay(repo, bus_publisher(bus)).drain() == 1
    published = await stream_events(bus)
    assert [name for _, name in published] == ["A"]  # JetStream dropped the re-publish


async def test_a_failed_change_leaves_no_event(repo: PostgresMowerRepository, bus: Bus) -> None:
    reg = await register(repo)
    now = datetime.now(UTC)
    with pytest.raises(MowerExistsError):
        await repo.add(MowerRecord(reg, now, now), outbox_event("mower.registered", reg, now=now))
    assert (await repo.outbox_stats()).pending == 1


async def test_replicas_publish_each_event_once_and_in_commit_order(
    repo: PostgresMowerRepository, bus: Bus
) -> None:
    names = [f"m{i:03d}" for i in range(120)]
    for name in names:
        await register(repo, name)
    relays = [OutboxRelay(repo, bus_publisher(bus), batch=7, poll_seconds=0.05) for _ in range(3)]
    for relay in relays:
        relay.start()
    try:
        for _ in range(200):
            if (await repo.outbox_stats()).pending == 0:
                break
            await asyncio.sleep(0.05)
    finally:
        for relay in relays:
            await relay.stop()
    published = await stream_events(bus)
    assert [name for _, name in published] == names
    assert len({msg_id for msg_id, _ in published}) == len(names)
