"""Notifications end to end: simulator -> gateway -> NATS -> Notifications -> inbox and feed.

A fault injected into a simulated mower makes its gateway report an error; the service
turns that into a ``mower_stuck`` in the subscriber's inbox and a ``notifications.sent``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from contracts.v1 import MowerListReply, MowerRegistration, NotificationSent, decode_event, encode
from contracts.v1.subjects import FLEET_MOWERS_LIST
from mowdeck.authn import AuthSettings, TokenVerifier
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
from mowdeck.notifications.postgres import PostgresNotificationStore
from mowdeck.notifications.preferences import Preferences
from mowdeck.notifications.service import NotificationsService
from mowdeck.notifications.settings import NotificationsSettings
from simulator import ErrorFault, FleetConfig, SimulatorServer
from tests.integration.gateway.conftest import running_gateway, settings_for
from tests.support.eventually import eventually
from tests.support.natsserver import NatsServer

ACCOUNT = uuid.UUID("00000000-0000-4000-8000-0000000e2e02")
AUTH = AuthSettings(jwt_secret="notifications-e2e-secret-0123456789abcdef")

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def sim() -> AsyncIterator[SimulatorServer]:
    """Two docked mowers."""
    server = SimulatorServer(FleetConfig(mowers=2, seed=7, speed=10.0, account_id=ACCOUNT))
    await server.start()
    yield server
    await server.stop()


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
    store = PostgresNotificationStore(pool)
    await store.put_preferences("erin", ACCOUNT, Preferences(scope="all", locale="en"))
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
            await eventually(lambda: store.read_watches([mower.mower_id]), timeout=15)
            await sim.inject(mower.mower_id, ErrorFault(code="lifted"))

            async def told() -> Any:
                items = (await store.inbox_page("erin", 10)).items
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
