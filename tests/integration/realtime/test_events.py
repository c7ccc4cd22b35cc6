"""Every event type end to end: a snapshot first, then state, command, link, notification."""

from __future__ import annotations

import uuid

import aiohttp
import msgspec
import pytest
from structlog.contextvars import merge_contextvars
from structlog.testing import capture_logs

from contracts.v1 import AlarmChanged, EventEnvelope, NotificationSent
from mowdeck.kit.bus import Bus
from mowdeck.kit.logging import ids_as_text
from mowdeck.realtime.positions import parse_position
from tests.integration.realtime.conftest import (
    ACCOUNT,
    FOREIGN,
    MOWER,
    OTHER,
    SECOND,
    MemoryLatestStates,
    Opener,
    ServiceFactory,
    now,
    publish_link,
    publish_result,
    publish_state,
    state,
)


async def test_a_snapshot_of_the_visible_mowers_comes_first(
    bus: Bus, make_service: ServiceFactory, open_stream: Opener
) -> None:
    await publish_state(bus, state(MOWER, battery=41))
    await publish_state(bus, state(FOREIGN, OTHER, battery=12))
    service = await make_service()
    reader = await open_stream(service)
    snapshot = await reader.next()
    assert snapshot.type == "snapshot"
    assert sorted(snapshot.data["mowers"]) == sorted([str(MOWER), str(SECOND)])
    assert [(s["mower_id"], s["battery"], s["stale"]) for s in snapshot.data["states"]] == [
        (str(MOWER), 41, False)
    ]
    assert parse_position(snapshot.id) is not None


async def test_state_command_and_link_events_carry_the_body_and_an_advancing_position(
    bus: Bus, make_service: ServiceFactory, open_stream: Opener
) -> None:
    service = await make_service()
    reader = await open_stream(service)
    first = await reader.next()
    await publish_state(bus, state(MOWER, battery=55))
    command_id = await publish_result(bus, MOWER, "executed")
    await publish_link(bus, MOWER, connected=False)
    got = [await reader.next() for _ in range(3)]
    assert [e.type for e in got] == ["state", "command", "link"]
    assert got[0].data["battery"] == 55
    assert got[1].data["command_id"] == str(command_id)
    assert got[1].data["status"] == "executed"
    assert got[2].data["connected"] is False
    assert got[2].data["mower_id"] == str(MOWER)
    positions = [parse_position(e.id) for e in [first, *got]]
    assert all(p is not None for p in positions)
    t = [p.telemetry for p in positions if p]
    c = [p.commands for p in positions if p]
    e = [p.events for p in positions if p]
    assert t[1] > t[0] and c[2] > c[1] and e[3] > e[2]


async def test_another_accounts_mowers_are_never_sent(
    bus: Bus, make_service: ServiceFactory, open_stream: Opener
) -> None:
    service = await make_service()
    reader = await open_stream(service)
    await reader.next()
    await publish_state(bus, state(FOREIGN, OTHER))
    await publish_link(bus, FOREIGN)
    await publish_state(bus, state(SECOND, battery=9))  # the sentinel: after the others
    event = await reader.next()
    assert (event.type, event.data["mower_id"]) == ("state", str(SECOND))


async def test_a_notification_reaches_its_own_user_only(
    bus: Bus, make_service: ServiceFactory, open_stream: Opener
) -> None:
    service = await make_service()
    alice = await open_stream(service, "alice")
    bob = await open_stream(service, "bob")
    await alice.next()
    await bob.next()
    sent = NotificationSent(
        notification_id=uuid.uuid4(),
        user_id="alice",
        mower_id=MOWER,
        kind="blade_blocked",
        severity="warning",
        dedupe_key="k",
        title="Mower 1: blade blocked",
        body="Check the blade.",
    )
    await bus.publish_event(EventEnvelope.new("notifications.sent", sent, producer="n", now=now()))
    await publish_link(bus, MOWER)  # the sentinel
    event = await alice.next()
    assert event.type == "notification"
    assert event.data["title"] == "Mower 1: blade blocked"
    assert event.data["severity"] == "warning"
    assert (await bob.next()).type == "link"


async def test_types_and_mowers_filter_the_events(
    bus: Bus, make_service: ServiceFactory, open_stream: Opener
) -> None:
    service = await make_service()
    reader = await open_stream(service, query=f"?types=command&mowers={SECOND}")
    snapshot = await reader.next()
    assert snapshot.data["mowers"] == [str(SECOND)]
    await publish_state(bus, state(SECOND))
    await publish_result(bus, MOWER)
    await publish_link(bus, SECOND)
    command_id = await publish_result(bus, SECOND)
    event = await reader.next()
    assert (event.type, event.data["command_id"]) == ("command", str(command_id))


@pytest.mark.parametrize(
    "query",
    [f"?mowers={FOREIGN}", "?mowers=not-a-mower", f"?mowers={MOWER},{uuid.uuid4()}"],
    ids=["another-account", "not-a-uuid", "one-unknown"],
)
async def test_a_mower_that_is_not_viewable_is_not_found(
    make_service: ServiceFactory, http: aiohttp.ClientSession, issuer: object, query: str
) -> None:
    from mowdeck.authn import TokenIssuer  # noqa: PLC0415 - the fixture's type

    assert isinstance(issuer, TokenIssuer)
    service = await make_service()
    token = issuer.mint("alice", ACCOUNT)
    async with http.get(
        f"{service.url}/v1/stream{query}", headers={"Authorization": f"Bearer {token}"}
    ) as response:
        assert response.status == 404
        assert response.content_type == "application/problem+json"


async def test_unknown_types_are_refused(
    make_service: ServiceFactory, http: aiohttp.ClientSession, issuer: object
) -> None:
    from mowdeck.authn import TokenIssuer  # noqa: PLC0415 - the fixture's type

    assert isinstance(issuer, TokenIssuer)
    service = await make_service()
    token = issuer.mint("alice", ACCOUNT)
    async with http.get(
        f"{service.url}/v1/stream?types=state,gossip", headers={"Authorization": f"Bearer {token}"}
    ) as response:
        assert response.status == 400


async def test_a_mower_the_stream_no_longer_holds_comes_from_telemetry_marked_stale(
    make_service: ServiceFactory, open_stream: Opener, latest_states: MemoryLatestStates
) -> None:
    latest_states.states[SECOND] = state(SECOND, battery=3)
    service = await make_service()
    reader = await open_stream(service)
    snapshot = await reader.next()
    assert [(s["mower_id"], s["battery"], s["stale"]) for s in snapshot.data["states"]] == [
        (str(SECOND), 3, True)
    ]


async def test_heartbeats_keep_an_idle_stream_alive(
    make_service: ServiceFactory, open_stream: Opener
) -> None:
    service = await make_service(realtime_heartbeat_seconds=0.1)
    reader = await open_stream(service)
    await reader.next()
    beat = await reader.next(skip=())
    assert beat.type == "heartbeat"
    assert parse_position(beat.id) is not None


async def test_a_websocket_frame_has_the_same_id_type_and_data(
    bus: Bus, make_service: ServiceFactory, http: aiohttp.ClientSession, issuer: object
) -> None:
    from mowdeck.authn import TokenIssuer  # noqa: PLC0415 - the fixture's type

    assert isinstance(issuer, TokenIssuer)
    service = await make_service()
    token = issuer.mint("alice", ACCOUNT)
    async with http.ws_connect(
        f"{service.url}/v1/ws", headers={"Authorization": f"Bearer {token}"}
    ) as ws:
        snapshot = await ws.receive_json(timeout=5)
        assert snapshot["type"] == "snapshot"
        await publish_state(bus, state(MOWER, battery=33))
        event = await ws.receive_json(timeout=5)
        assert set(event) == {"id", "type", "data"}
        assert (event["type"], event["data"]["battery"]) == ("state", 33)
        assert parse_position(event["id"]) is not None


async def test_a_stream_s_lines_name_its_reader_and_the_service(
    make_service: ServiceFactory, open_stream: Opener
) -> None:
    with capture_logs(processors=[merge_contextvars, ids_as_text]) as logs:
        service = await make_service()
        reader = await open_stream(service)
        assert (await reader.next()).type == "snapshot"
        await service.stop()  # the stream is told and ends
        await reader.ended()
    [line] = [line for line in logs if line["event"] == "stream ended"]
    assert (line["service"], line["user_id"], line["account_id"]) == (
        "realtime",
        "alice",
        str(ACCOUNT),
    )


async def test_an_alarm_change_reaches_every_stream_that_shows_its_mower(
    bus: Bus, make_service: ServiceFactory, open_stream: Opener
) -> None:
    service = await make_service()
    alice = await open_stream(service, "alice")
    bob = await open_stream(service, "bob")
    await alice.next()
    await bob.next()
    at = now()
    changed = AlarmChanged(
        alarm_id=uuid.uuid4(),
        mower_id=MOWER,
        condition="battery_low",
        kind="battery_low",
        severity="warning",
        state="active",
        change="raised",
        first_at=at,
        latest_at=at,
    )
    foreign = msgspec.structs.replace(changed, alarm_id=uuid.uuid4(), mower_id=FOREIGN)
    for payload, account in ((changed, ACCOUNT), (foreign, OTHER)):
        await bus.publish_event(
            EventEnvelope.new(
                "notifications.alarm_changed", payload, producer="n", now=at, account_id=account
            )
        )
    await publish_link(bus, MOWER)  # the sentinel: the foreign mower's alarm came before it
    for reader in (alice, bob):
        event = await reader.next()
        assert event.type == "alarm"
        assert (event.data["alarm_id"], event.data["change"]) == (str(changed.alarm_id), "raised")
        assert (await reader.next()).type == "link"
