"""Resuming from Last-Event-ID (or ?since=) without gaps, and the resync when it cannot."""

from __future__ import annotations

import itertools

import pytest

from mowdeck.kit.bus import Bus
from mowdeck.realtime.positions import Position, format_position, parse_position
from tests.integration.realtime.conftest import (
    MOWER,
    SECOND,
    Opener,
    ServiceFactory,
    publish_link,
    publish_result,
    publish_state,
    state,
)


@pytest.mark.parametrize("how", ["header", "query"])
async def test_a_client_resumes_every_stream_without_gaps_or_duplicates(
    bus: Bus, make_service: ServiceFactory, open_stream: Opener, how: str
) -> None:
    service = await make_service()
    first = await open_stream(service)
    await first.next()
    await publish_state(bus, state(MOWER, battery=10))
    last_seen = await first.next()
    await first.close()
    # Missed while away, in all three streams, interleaved.
    await publish_state(bus, state(MOWER, battery=11))
    missed_command = await publish_result(bus, MOWER)
    await publish_link(bus, SECOND)
    await publish_state(bus, state(SECOND, battery=12))

    if how == "header":
        again = await open_stream(service, headers={"Last-Event-ID": last_seen.id})
    else:
        again = await open_stream(service, query=f"?since={last_seen.id}")
    await publish_state(bus, state(MOWER, battery=13))  # live, after the replay
    got = [await again.next() for _ in range(5)]
    summary = [(e.type, e.data.get("battery") or e.data.get("command_id")) for e in got]
    # The replay reads TELEMETRY, then COMMANDS, then EVENTS, up to what the service's live
    # subscriptions had taken in; what they take in after that comes live. So state 12 may
    # follow the link, but every event comes once and each stream keeps its order.
    expected = [("state", 11), ("state", 12), ("command", str(missed_command)), ("link", None)]
    assert sorted(summary, key=str) == sorted([*expected, ("state", 13)], key=str)
    assert [b for t, b in summary if t == "state"] == [11, 12, 13]
    assert summary[0] == ("state", 11)
    positions = [parse_position(e.id) for e in [last_seen, *got]]
    assert all(p is not None for p in positions)
    for earlier, later in itertools.pairwise(positions):
        assert earlier is not None and later is not None
        assert all(a <= b for a, b in zip(earlier, later, strict=True))
    assert service.metrics.resumes._value.get() == 1


async def test_a_resume_at_the_current_position_sends_nothing_but_what_comes(
    bus: Bus, make_service: ServiceFactory, open_stream: Opener
) -> None:
    service = await make_service()
    first = await open_stream(service)
    snapshot = await first.next()
    again = await open_stream(service, headers={"Last-Event-ID": snapshot.id})
    await publish_state(bus, state(MOWER, battery=77))
    event = await again.next()
    assert (event.type, event.data["battery"]) == ("state", 77)


@pytest.mark.parametrize(
    "last_id", ["nonsense", "t1.c2", "t-1.c0.e0"], ids=["garbage", "short", "negative"]
)
async def test_an_id_that_names_no_position_gets_a_resync_and_a_snapshot(
    make_service: ServiceFactory, open_stream: Opener, last_id: str
) -> None:
    service = await make_service()
    reader = await open_stream(service, headers={"Last-Event-ID": last_id})
    resync = await reader.next()
    assert (resync.type, resync.data["reason"]) == ("resync", "unknown-position")
    assert (await reader.next()).type == "snapshot"


async def test_a_position_ahead_of_the_streams_gets_a_resync(
    make_service: ServiceFactory, open_stream: Opener
) -> None:
    service = await make_service()
    ahead = format_position(Position(10_000, 0, 0))
    reader = await open_stream(service, headers={"Last-Event-ID": ahead})
    resync = await reader.next()
    assert (resync.type, resync.data["reason"]) == ("resync", "unknown-position")


async def test_a_position_the_streams_no_longer_hold_gets_a_resync(
    bus: Bus, make_service: ServiceFactory, open_stream: Opener
) -> None:
    service = await make_service()
    first = await open_stream(service)
    await first.next()
    await publish_state(bus, state(MOWER, battery=20))
    seen = await first.next()
    await first.close()
    await publish_state(bus, state(MOWER, battery=21))
    await bus.js.purge_stream("TELEMETRY")  # what the client missed is gone
    await publish_state(bus, state(MOWER, battery=22))
    reader = await open_stream(service, headers={"Last-Event-ID": seen.id})
    resync = await reader.next()
    assert (resync.type, resync.data["reason"]) == ("resync", "expired")
    snapshot = await reader.next()
    assert snapshot.type == "snapshot"
    batteries = [s["battery"] for s in snapshot.data["states"]]
    if batteries != [22]:
        # The snapshot is what the service held when the client came back; its live
        # subscription may not have taken in the newest state yet, which then follows.
        assert batteries == [21]
        follow = await reader.next()
        assert (follow.type, follow.data["battery"]) == ("state", 22)
    labels = {"reason": "expired"}
    assert service.metrics_registry.get_sample_value("mowdeck_realtime_resyncs_total", labels) == 1
