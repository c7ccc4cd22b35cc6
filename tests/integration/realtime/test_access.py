"""Authorization over a stream's life: revoked grants, new mowers, disabled users, limits, CORS."""

from __future__ import annotations

import time
import uuid

import aiohttp

from contracts.v1 import EventEnvelope, GrantsChanged, MowerRegistration, UserRef
from contracts.v1.fleet import Connection
from mowdeck.authn import TokenIssuer
from mowdeck.authz import LocalAuthorizer, Tuple, account_object, mower_object, revoke_tuples
from mowdeck.kit.bus import Bus
from tests.integration.realtime.conftest import (
    ACCOUNT,
    MOWER,
    SECOND,
    Opener,
    ServiceFactory,
    now,
    publish_link,
    publish_state,
    state,
)


async def test_a_revoked_viewer_stops_receiving_within_the_refresh_time(
    bus: Bus, make_service: ServiceFactory, open_stream: Opener, authorizer: LocalAuthorizer
) -> None:
    refresh = 0.5
    service = await make_service(
        realtime_authz_refresh_seconds=refresh, realtime_heartbeat_seconds=0.1
    )
    reader = await open_stream(service)
    await reader.next()
    await publish_state(bus, state(MOWER, battery=1))
    assert (await reader.next()).type == "state"
    # Revoked in the tuples alone: no event tells Realtime, only its refresh finds out.
    await authorizer.write([], revoke_tuples(ACCOUNT, "alice", "viewer"))
    revoked_at = time.monotonic()
    access = await reader.next(skip=("heartbeat", "state"), timeout=refresh * 4)
    assert access.type == "access"
    assert sorted(access.data["removed"]) == sorted([str(MOWER), str(SECOND)])
    assert time.monotonic() - revoked_at <= refresh * 2
    await publish_state(bus, state(MOWER, battery=2))
    await publish_link(bus, MOWER)
    # The sentinel: a heartbeat whose position is past both messages was offered after
    # the hub handled them, so whatever they would have given this client came before it.
    t = (await bus.js.stream_info("TELEMETRY")).state.last_seq
    e = (await bus.js.stream_info("EVENTS")).state.last_seq
    while True:
        event = await reader.next(skip=(), timeout=refresh * 4)
        assert event.type in ("heartbeat", "access"), f"a revoked viewer received {event.type}"
        position = {part[0]: int(part[1:]) for part in event.id.split(".")}
        if event.type == "heartbeat" and position["t"] >= t and position["e"] >= e:
            break


async def test_grants_changed_refreshes_at_once(
    bus: Bus, make_service: ServiceFactory, open_stream: Opener, authorizer: LocalAuthorizer
) -> None:
    service = await make_service(realtime_authz_refresh_seconds=60)
    reader = await open_stream(service)
    await reader.next()
    await authorizer.write([], revoke_tuples(ACCOUNT, "alice", "viewer"))
    change = GrantsChanged(account_id=ACCOUNT, user_id="alice")
    await bus.publish_event(
        EventEnvelope.new("identity.grants.changed", change, producer="id", now=now())
    )
    access = await reader.next(timeout=3)
    assert access.type == "access"
    assert len(access.data["removed"]) == 2


async def test_a_registered_mower_becomes_visible_with_its_state(
    bus: Bus, make_service: ServiceFactory, open_stream: Opener, authorizer: LocalAuthorizer
) -> None:
    service = await make_service(realtime_authz_refresh_seconds=60)
    reader = await open_stream(service)
    await reader.next()
    newcomer = uuid.uuid4()
    await publish_state(bus, state(newcomer, battery=66))
    await authorizer.write([Tuple(account_object(ACCOUNT), "account", mower_object(newcomer))])
    registration = MowerRegistration(
        mower_id=newcomer, account_id=ACCOUNT, name="n", connection=Connection(kind="simulator")
    )
    await bus.publish_event(
        EventEnvelope.new("mower.registered", registration, producer="fleet", now=now())
    )
    access = await reader.next(timeout=3)
    assert (access.type, access.data["added"]) == ("access", [str(newcomer)])
    shown = await reader.next()
    assert (shown.type, shown.data["battery"]) == ("state", 66)


async def test_a_disabled_users_streams_close_and_stay_closed(
    bus: Bus,
    make_service: ServiceFactory,
    open_stream: Opener,
    http: aiohttp.ClientSession,
    issuer: TokenIssuer,
) -> None:
    service = await make_service()
    alice = await open_stream(service, "alice")
    bob = await open_stream(service, "bob")
    await alice.next()
    await bob.next()
    ref = UserRef(user_id="alice", account_id=ACCOUNT)
    await bus.publish_event(
        EventEnvelope.new("identity.user.disabled", ref, producer="id", now=now())
    )
    rest = await alice.ended()
    assert [e.type for e in rest if e.type != "heartbeat"] == ["close"]
    assert rest[-1].data["reason"] == "user-disabled"
    token = issuer.mint("alice", ACCOUNT)
    async with http.get(
        f"{service.url}/v1/stream", headers={"Authorization": f"Bearer {token}"}
    ) as response:
        assert (response.status, (await response.json())["reason"]) == (401, "disabled")
    await publish_link(bus, MOWER)
    assert (await bob.next()).type == "link"


async def test_streams_per_user_are_limited(
    make_service: ServiceFactory,
    open_stream: Opener,
    http: aiohttp.ClientSession,
    issuer: TokenIssuer,
) -> None:
    service = await make_service(realtime_max_connections_per_user=2)
    for _ in range(2):
        await (await open_stream(service, "alice")).next()
    token = issuer.mint("alice", ACCOUNT)
    async with http.get(
        f"{service.url}/v1/stream", headers={"Authorization": f"Bearer {token}"}
    ) as response:
        assert response.status == 429
        assert response.headers["Retry-After"]
    await (await open_stream(service, "bob")).next()  # others are not held back


async def test_cross_origin_reads_are_limited_to_the_configured_origins(
    make_service: ServiceFactory, open_stream: Opener, http: aiohttp.ClientSession
) -> None:
    console = "http://console.example"
    service = await make_service(http_cors_origins=(console,))
    preflight = {
        "Origin": console,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization",
    }
    async with http.options(f"{service.url}/v1/stream/tickets", headers=preflight) as response:
        assert response.status == 204
        assert response.headers["Access-Control-Allow-Origin"] == console
        assert "Authorization" in response.headers["Access-Control-Allow-Headers"]
    foreign = {**preflight, "Origin": "http://evil.example"}
    async with http.options(f"{service.url}/v1/stream/tickets", headers=foreign) as response:
        assert response.status == 403
        assert "Access-Control-Allow-Origin" not in response.headers
    reader = await open_stream(service, headers={"Origin": console})
    assert reader.response.headers["Access-Control-Allow-Origin"] == console
    async with http.get(
        f"{service.url}/v1/ws", headers={"Origin": "http://evil.example"}
    ) as response:
        assert response.status == 403
