"""Notifications end to end: simulator -> gateway -> NATS -> Notifications -> devices.

A fault injected into a simulated mower makes its gateway report an error; the service
turns that into a ``mower_stuck`` in the subscribers' inboxes and a ``notifications.sent``,
and its delivery worker pushes it to each subscriber's browser: the local push service checks the
VAPID JWT and decrypts the push as that browser would, in the subscriber's language.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest

from contracts.v1 import MowerListReply, MowerRegistration, NotificationSent, decode_event, encode
from contracts.v1.subjects import FLEET_MOWERS_LIST
from mowdeck.authn import AuthSettings, TokenIssuer, TokenVerifier
from mowdeck.authz import (
    InMemoryTupleStore,
    LocalAuthorizer,
    Tuple,
    account_object,
    grant_tuples,
    mower_object,
)
from mowdeck.kit.bus import Bus
from mowdeck.kit.migrate import discover, migrate, sql_root
from mowdeck.notifications.inbox.preferences import Preferences
from mowdeck.notifications.infra import Stores
from mowdeck.notifications.service import NotificationsService
from mowdeck.notifications.settings import NotificationsSettings
from simulator import ErrorFault, FleetConfig, SimulatorServer
from tests.integration.gateway.conftest import running_gateway, settings_for
from tests.support.eventually import eventually
from tests.support.natsserver import NatsServer
from tests.support.webpush_receiver import BrowserSubscription, Received, WebPushReceiver

ACCOUNT = uuid.UUID("00000000-0000-4000-8000-0000000e2e02")
AUTH = AuthSettings(jwt_secret="notifications-e2e-secret-0123456789abcdef")

ISSUER = TokenIssuer(AUTH)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def sim() -> AsyncIterator[SimulatorServer]:
    """Two docked mowers."""
    server = SimulatorServer(FleetConfig(mowers=2, seed=7, speed=10.0, account_id=ACCOUNT))
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def sim_b() -> AsyncIterator[SimulatorServer]:
    """Two other docked mowers (the module shares one database: no watch of theirs yet)."""
    server = SimulatorServer(FleetConfig(mowers=2, seed=8, speed=10.0, account_id=ACCOUNT))
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def push_service() -> AsyncIterator[WebPushReceiver]:
    """A local push service that verifies VAPID and decrypts every push."""
    async with WebPushReceiver() as receiver:
        yield receiver


async def _answer_fleet(bus: Bus, mowers: list[MowerRegistration]) -> Any:
    async def answer(msg: Any) -> None:
        await msg.respond(encode(MowerListReply(mowers=mowers)))

    return await bus.nc.subscribe(FLEET_MOWERS_LIST, cb=answer)


async def test_an_injected_fault_reaches_the_inbox_and_the_feed(
    nats_server: NatsServer, bus: Bus, database_url: str, sim: SimulatorServer
) -> None:
    await migrate(database_url, discover(sql_root(), ["notifications"]))
    mowers = sim.registrations()
    mower = mowers[0]
    fleet = await _answer_fleet(bus, mowers)
    authorizer = LocalAuthorizer(InMemoryTupleStore())
    await authorizer.write(
        [
            *grant_tuples(ACCOUNT, "erin", "viewer"),
            *(Tuple(account_object(ACCOUNT), "account", mower_object(m.mower_id)) for m in mowers),
        ]
    )
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=4)
    stores = Stores.postgres(pool)
    await stores.preferences.put_preferences("erin", ACCOUNT, Preferences(scope="all", locale="en"))
    sent: list[NotificationSent] = []

    async def on_sent(msg: Any) -> None:
        sent.append(decode_event(msg.data).payload)

    feed = await bus.nc.subscribe("event.notifications.sent", cb=on_sent)
    service = NotificationsService(
        NotificationsSettings(
            nats_url=nats_server.url,
            database_url=database_url,
            http_port=0,
            notifications_state_batch_linger_ms=5.0,
            notifications_fanout_poll_seconds=0.1,
            notifications_channels=["ntfy", "log"],
        ),
        bus=bus,
        pool=pool,
        authorizer=authorizer,
        verifier=TokenVerifier(AUTH),
    )
    await service.start()
    try:
        async with running_gateway(
            settings_for(nats_server.url, mowers, state_heartbeat_seconds=1)
        ):
            # The first state only starts the watch (old news notifies nothing).
            await eventually(lambda: stores.watches.read_watches([mower.mower_id]), timeout=15)
            await sim.inject(mower.mower_id, ErrorFault(code="lifted"))

            async def told() -> Any:
                items = (await stores.inbox.inbox_page("erin", 10)).items
                return items or None

            items = await eventually(told, timeout=15, what="the stuck mower in the inbox")
            assert [(i.kind, i.mower_id) for i in items] == [("mower_stuck", mower.mower_id)]
            assert items[0].params["error_code"] == "lifted"
            notice = await eventually(lambda: sent, what="notifications.sent")
            assert notice[0].notification_id == items[0].id
            assert notice[0].severity == "critical"
            assert mower.name in notice[0].title
    finally:
        await service.stop()
        await feed.unsubscribe()
        await fleet.unsubscribe()
        await pool.close()


async def _register(base: str, user: str, sub: BrowserSubscription) -> None:
    """Register a browser's subscription as the console does: through the targets API."""
    headers = {"Authorization": f"Bearer {ISSUER.mint(user, ACCOUNT)}"}
    doc = {"channel": "webpush", "subscription": sub.to_json()}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{base}/v1/notifications/targets", json=doc, headers=headers) as response,
    ):
        assert response.status == 201, await response.text()


async def test_an_injected_fault_reaches_each_browser_in_its_users_language(
    nats_server: NatsServer,
    bus: Bus,
    database_url: str,
    *,
    sim_b: SimulatorServer,
    push_service: WebPushReceiver,
    tmp_path: Path,
) -> None:
    sim = sim_b
    await migrate(database_url, discover(sql_root(), ["notifications"]))
    mowers = sim.registrations()
    mower = mowers[0]
    fleet = await _answer_fleet(bus, mowers)
    authorizer = LocalAuthorizer(InMemoryTupleStore())
    await authorizer.write(
        [
            *grant_tuples(ACCOUNT, "dora", "viewer"),
            *grant_tuples(ACCOUNT, "ed", "viewer"),
            *(Tuple(account_object(ACCOUNT), "account", mower_object(m.mower_id)) for m in mowers),
        ]
    )
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=4)
    stores = Stores.postgres(pool)
    await stores.preferences.put_preferences("dora", ACCOUNT, Preferences(scope="all", locale="de"))
    await stores.preferences.put_preferences("ed", ACCOUNT, Preferences(scope="all", locale="en"))
    service = NotificationsService(
        NotificationsSettings(
            nats_url=nats_server.url,
            database_url=database_url,
            http_port=0,
            notifications_state_batch_linger_ms=5.0,
            notifications_fanout_poll_seconds=0.1,
            notifications_channels=["webpush", "log"],
            notifications_vapid_key_file=str(tmp_path / "vapid.pem"),
            notifications_vapid_subject="mailto:ops@mowdeck.example",
            # The push service is on loopback here; production allows only public ones.
            notifications_push_hosts=["127.0.0.1"],
            notifications_insecure_hosts=["127.0.0.1"],
        ),
        bus=bus,
        pool=pool,
        authorizer=authorizer,
        verifier=TokenVerifier(AUTH),
    )
    await service.start()
    try:
        doras, eds = push_service.subscribe("dora-phone"), push_service.subscribe("ed-laptop")
        await _register(service.url, "dora", doras)
        await _register(service.url, "ed", eds)
        async with running_gateway(
            settings_for(nats_server.url, mowers, state_heartbeat_seconds=1)
        ):
            # The first state only starts the watch (old news notifies nothing).
            await eventually(lambda: stores.watches.read_watches([mower.mower_id]), timeout=15)
            await sim.inject(mower.mower_id, ErrorFault(code="lifted"))
            await push_service.wait_for(2, timeout=20)
            doras_pushes = push_service.received_by(doras)
            eds_pushes = push_service.received_by(eds)
            assert len(doras_pushes) == 1 and len(eds_pushes) == 1
            german, english = _payload(doras_pushes[0]), _payload(eds_pushes[0])
            assert german["title"] == f"{mower.name} braucht Hilfe"
            assert german["body"] == "Mit dem Fehler lifted angehalten."
            assert english["title"] == f"{mower.name} needs help"
            assert english["body"] == "Stopped with error lifted."
            for push in (doras_pushes[0], eds_pushes[0]):
                payload = _payload(push)
                assert (payload["kind"], payload["mower_id"]) == (
                    "mower_stuck",
                    str(mower.mower_id),
                )
                assert push.headers["Urgency"] == "high"
                assert push.claims["aud"] == push_service.origin
            # Nothing more for the first fault: a second mower's fault, pushed after it
            # through the same path, arrives and the first mower still has one push each.
            other = mowers[1]
            await eventually(lambda: stores.watches.read_watches([other.mower_id]), timeout=15)
            await sim.inject(other.mower_id, ErrorFault(code="outside_area"))
            await push_service.wait_for(4, timeout=20)
            first = [
                r for r in push_service.received if _payload(r)["mower_id"] == str(mower.mower_id)
            ]
            assert len(first) == 2
            assert len(push_service.received) == 4
        items = (await stores.inbox.inbox_page("dora", 10)).items
        assert {(i.kind, i.mower_id) for i in items} == {
            ("mower_stuck", mower.mower_id),
            ("mower_stuck", other.mower_id),
        }
        assert not push_service.problems
    finally:
        await service.stop()
        await fleet.unsubscribe()
        await pool.close()


def _payload(push: Received) -> dict[str, Any]:
    assert push.payload is not None, "the push was not decrypted"
    return push.payload
