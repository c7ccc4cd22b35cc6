"""The shared deny-list on real NATS: disabled users are refused by every Fleet replica."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime

import aiohttp
import asyncpg
import pytest

from contracts.v1 import UserRef
from mowdeck.authn import Denial, DenyList, JetStreamDenyList, MemoryDenyList
from mowdeck.authn._denylist import key_of
from mowdeck.authz import Authorizer
from mowdeck.commands.identity_events import publish_identity_event
from mowdeck.fleet import FleetService
from mowdeck.kit.bus import Bus
from tests.integration.fleet.conftest import AUTH, Api, start_fleet
from tests.support.eventually import eventually
from tests.support.natsserver import NatsServer

ACCOUNT = uuid.UUID("0000000c-0000-4000-8000-00000000000c")


async def _disable(nats_server: NatsServer, user: str, event: str = "disabled") -> None:
    await publish_identity_event(
        nats_server.url, f"identity.user.{event}", UserRef(user_id=user, account_id=ACCOUNT)
    )


async def _status(
    http: aiohttp.ClientSession, fleet: FleetService, user: str
) -> tuple[int, object]:
    return await Api(http, fleet.url, user, ACCOUNT).call("GET", "/v1/mowers")


@pytest.fixture
async def fleets(
    bus: Bus, pool: asyncpg.Pool, authorizer: Authorizer
) -> AsyncIterator[Callable[[], Awaitable[FleetService]]]:
    started: list[FleetService] = []

    async def start() -> FleetService:
        service = await start_fleet(bus, pool, authorizer)
        started.append(service)
        return service

    yield start
    for service in reversed(started):
        await service.stop()


async def test_a_disabled_user_is_refused_by_a_running_fleet_with_reason_disabled(
    fleets: Callable[[], Awaitable[FleetService]],
    http: aiohttp.ClientSession,
    nats_server: NatsServer,
) -> None:
    fleet = await fleets()
    assert (await _status(http, fleet, "dora"))[0] == 200
    await _disable(nats_server, "dora")

    async def refused() -> object:
        status, body = await _status(http, fleet, "dora")
        return body if status == 401 else None

    body = await eventually(refused, timeout=5.0, what="dora refused")
    assert isinstance(body, dict)
    assert body["reason"] == "disabled"
    assert body["type"].endswith("unauthenticated")
    assert (await _status(http, fleet, "erik"))[0] == 200, "a user not on the list passes"


@pytest.mark.parametrize("event", ["disabled", "deleted"])
async def test_a_replica_started_after_the_event_refuses_the_user(
    fleets: Callable[[], Awaitable[FleetService]],
    http: aiohttp.ClientSession,
    nats_server: NatsServer,
    event: str,
) -> None:
    first = await fleets()
    await _disable(nats_server, "fritz", event)
    await eventually(lambda: _refused(http, first, "fritz"), timeout=5.0)
    later = await fleets()
    status, body = await _status(http, later, "fritz")
    assert (status, body["reason"] if isinstance(body, dict) else None) == (401, "disabled")


async def test_an_event_published_while_no_service_ran_is_recorded_at_the_next_start(
    fleets: Callable[[], Awaitable[FleetService]],
    http: aiohttp.ClientSession,
    nats_server: NatsServer,
) -> None:
    await _disable(nats_server, "greta")
    fleet = await fleets()
    await eventually(lambda: _refused(http, fleet, "greta"), timeout=5.0)
    assert (await _status(http, fleet, "hans"))[0] == 200


async def test_deleting_the_key_lets_the_user_in_again(
    fleets: Callable[[], Awaitable[FleetService]],
    http: aiohttp.ClientSession,
    nats_server: NatsServer,
    bus: Bus,
) -> None:
    fleet = await fleets()
    await _disable(nats_server, "ida")
    await eventually(lambda: _refused(http, fleet, "ida"), timeout=5.0)
    kv = await bus.js.key_value(AUTH.denylist_bucket)
    await kv.delete(key_of("ida"))

    async def allowed() -> bool:
        return (await _status(http, fleet, "ida"))[0] == 200

    await eventually(allowed, timeout=5.0)


async def _refused(http: aiohttp.ClientSession, fleet: FleetService, user: str) -> bool:
    return (await _status(http, fleet, user))[0] == 401


# The port's contract, held by the in-memory fake and the JetStream adapter alike.


@pytest.fixture(params=["memory", "jetstream"])
async def denylist(request: pytest.FixtureRequest, bus: Bus) -> AsyncIterator[DenyList]:
    found: DenyList = MemoryDenyList() if request.param == "memory" else JetStreamDenyList(AUTH)
    await found.start(bus)
    yield found
    await found.stop()


def _denial(user: str) -> Denial:
    return Denial(user_id=user, reason="disabled", at=datetime.now(UTC))


async def test_contract_a_denied_user_is_denied_and_told_once(denylist: DenyList) -> None:
    told: list[str] = []
    unsubscribe = denylist.subscribe(lambda d: told.append(d.user_id))
    odd = "user with spaces/and ünïcode"
    await denylist.deny(_denial(odd))
    await denylist.deny(_denial(odd))
    assert denylist.is_denied(odd)
    assert not denylist.is_denied("someone else")
    assert told == [odd]
    unsubscribe()
    await denylist.deny(_denial("jakob"))
    assert told == [odd]


async def test_contract_a_denial_says_why(denylist: DenyList) -> None:
    assert denylist.denial("maria") is None
    await denylist.deny(Denial(user_id="maria", reason="deleted", at=datetime.now(UTC)))
    found = denylist.denial("maria")
    assert found is not None
    assert (found.user_id, found.reason) == ("maria", "deleted")


async def test_contract_a_failing_listener_does_not_stop_the_others(denylist: DenyList) -> None:
    told: list[str] = []

    def broken(_: Denial) -> None:
        raise RuntimeError("listener bug")

    denylist.subscribe(broken)
    denylist.subscribe(lambda d: told.append(d.user_id))
    await denylist.deny(_denial("karl"))
    assert told == ["karl"]


async def test_a_denial_written_by_one_instance_reaches_another(bus: Bus) -> None:
    writer, reader = JetStreamDenyList(AUTH, record=False), JetStreamDenyList(AUTH, record=False)
    await writer.start(bus)
    await reader.start(bus)
    told: list[Denial] = []
    reader.subscribe(told.append)
    try:
        await writer.deny(_denial("lena"))
        await eventually(lambda: reader.is_denied("lena"), timeout=5.0)
        assert [d.user_id for d in told] == ["lena"]
    finally:
        await writer.stop()
        await reader.stop()
