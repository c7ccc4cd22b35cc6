"""The events relay: in order and again after a failure; its publisher on a fake bus (size
limit, refusals, lost acks) and setting aside."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry

from contracts.v1 import Connection, MowerRegistration
from mowdeck.fleet.events_relay import EventsRelay, EventsRelayMetrics, bus_publisher
from mowdeck.fleet.memory import InMemoryMowerRepository
from mowdeck.fleet.ports import MowerRecord, RegistryEvent
from mowdeck.fleet.rules import registry_event
from mowdeck.kit.bus import BusError
from tests.support.eventually import eventually
from tests.support.fakes import NO_STREAM, STORED, FakeBus, PubAnswer, refusal_of

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
MAX_PAYLOAD = 4096


def bus_answering(answer: PubAnswer = STORED) -> FakeBus:
    """A bus with the relay's connection limit whose stream answers with ``answer``."""
    return FakeBus(answer=answer, max_payload=MAX_PAYLOAD)


def sent(bus: FakeBus) -> list[str | None]:
    """The msg ids published, in order."""
    return [p.msg_id for p in bus.published]


def event(size: int = 100) -> RegistryEvent:
    return RegistryEvent(uuid.uuid4(), "event.mower.registered", b"x" * size, NOW)


def _reg(name: str) -> MowerRegistration:
    return MowerRegistration(
        mower_id=uuid.uuid4(),
        account_id=uuid.uuid4(),
        name=name,
        connection=Connection(kind="simulator"),
    )


async def test_the_relay_publishes_in_order_and_retries_what_failed() -> None:
    repo = InMemoryMowerRepository()
    for name in ("a", "b", "c"):
        reg = _reg(name)
        await repo.add(MowerRecord(reg, NOW, NOW), registry_event("mower.registered", reg, now=NOW))
    sent: list[RegistryEvent] = []
    fail = True
    failed_rounds = 0

    async def publish(events: list[RegistryEvent]) -> dict[uuid.UUID, str]:
        nonlocal failed_rounds
        if fail:
            failed_rounds += 1
            raise ConnectionError("bus down")
        sent.extend(events)
        return {}

    relay = EventsRelay(repo, publish, batch=2, poll_seconds=0.01)
    relay.start()
    # No message path here: the synchronisation point is the relay coming back for a
    # second round, after the first one failed and was handled.
    await eventually(lambda: failed_rounds >= 2)
    assert (await repo.relay_stats()).pending == 3
    fail = False

    async def drained() -> bool:
        return (await repo.relay_stats()).pending == 0

    await eventually(drained, 2.0)
    await relay.stop()
    assert [e.event_id for e in sent] == [e.event_id for e, _ in repo.events]


async def test_an_event_larger_than_the_max_payload_is_refused_without_being_sent() -> None:
    bus = bus_answering()
    small, big, header_eaten = event(), event(MAX_PAYLOAD + 1), event(MAX_PAYLOAD - 10)
    refused = await bus_publisher(bus)([small, big, header_eaten])  # type: ignore[arg-type]
    assert set(refused) == {big.event_id, header_eaten.event_id}
    assert "max_payload" in refused[big.event_id]
    assert sent(bus) == [str(small.event_id)]


async def test_jetstream_refusing_a_message_for_its_size_is_final_other_errors_retry() -> None:
    too_large = refusal_of(10054, "message size exceeds maximum")
    first, second = event(), event()
    bus = bus_answering(lambda p: too_large if p.msg_id == str(first.event_id) else STORED)
    refused = await bus_publisher(bus)([first, second])  # type: ignore[arg-type]
    assert list(refused) == [first.event_id]

    down = bus_answering(NO_STREAM)
    with pytest.raises(BusError):
        await bus_publisher(down)([event()])  # type: ignore[arg-type]


async def test_acks_that_never_come_fail_the_round_after_the_timeout_and_are_released() -> None:
    bus = bus_answering(None)
    publish = bus_publisher(bus, ack_timeout=0.2)  # type: ignore[arg-type]
    started = asyncio.get_running_loop().time()
    with pytest.raises(BusError):
        await asyncio.wait_for(publish([event(), event()]), timeout=3)
    assert 0.2 <= asyncio.get_running_loop().time() - started < 1.0
    assert len(sent(bus)) == 2


async def _registered(repo: InMemoryMowerRepository, names: str) -> list[RegistryEvent]:
    found = []
    for name in names:
        reg = MowerRegistration(
            mower_id=uuid.uuid4(),
            account_id=uuid.uuid4(),
            name=name,
            connection=Connection(kind="simulator"),
        )
        row = registry_event("mower.registered", reg, now=NOW)
        await repo.add(MowerRecord(reg, NOW, NOW), row)
        found.append(row)
    return found


async def test_an_event_that_can_never_be_published_is_set_aside_and_the_rest_go_on() -> None:
    repo = InMemoryMowerRepository()
    a, poison, c = await _registered(repo, "abc")
    sent: list[uuid.UUID] = []

    async def publish(events: list[RegistryEvent]) -> dict[uuid.UUID, str]:
        sent.extend(e.event_id for e in events if e.event_id != poison.event_id)
        return {poison.event_id: "too large"}

    registry = CollectorRegistry()
    relay = EventsRelay(repo, publish, batch=2, metrics=EventsRelayMetrics(registry))
    assert await relay.drain() == 3
    assert sent == [a.event_id, c.event_id]
    stats = await repo.relay_stats()
    assert (stats.pending, stats.set_aside) == (0, 1)
    assert repo.failed == {poison.event_id: "too large"}
    for prefix in ("mowdeck_fleet_events_relay_", "mowdeck_fleet_outbox_"):  # the former too
        assert registry.get_sample_value(f"{prefix}unpublishable_total") == 1
        assert registry.get_sample_value(f"{prefix}published_total") == 2
    assert await relay.drain() == 0  # never claimed again
