"""Fixtures: Notifications replicas on real NATS and PostgreSQL, a settable clock, a Fleet."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import Any

import asyncpg
import msgspec
import pytest

from contracts.v1 import (
    EventEnvelope,
    MowerListRequest,
    MowerRegistration,
    MowerState,
    NotificationSent,
    decode,
    decode_event,
    encode,
)
from contracts.v1.fleet import Connection
from contracts.v1.subjects import FLEET_MOWERS_LIST
from mowdeck.authn import TokenVerifier
from mowdeck.authz import (
    InMemoryTupleStore,
    LocalAuthorizer,
    Tuple,
    account_object,
    grant_tuples,
    mower_object,
)
from mowdeck.kit.bus import Bus
from mowdeck.notifications.inbox.model import InboxItem
from mowdeck.notifications.inbox.preferences import Preferences
from mowdeck.notifications.infra import Stores
from mowdeck.notifications.service import NotificationsService
from mowdeck.notifications.settings import NotificationsSettings
from tests.support.eventually import eventually
from tests.support.natsserver import NatsServer
from tests.support.settings import fast_path_from_environment
from tests.unit.notifications.samples import ACCOUNT, AUTH, MOWER, OTHER_MOWER, T0, Clock

MOWERS = {MOWER: "Rasenmeister", OTHER_MOWER: "Lawnbot"}


@pytest.fixture
def clock() -> Clock:
    """A clock at ``T0``."""
    return Clock(T0)


@pytest.fixture
async def authorizer() -> LocalAuthorizer:
    """In-process authorization: the sample mowers belong to the sample account."""
    authz = LocalAuthorizer(InMemoryTupleStore())
    await authz.write([Tuple(account_object(ACCOUNT), "account", mower_object(m)) for m in MOWERS])
    return authz


async def grant(authz: LocalAuthorizer, user_id: str, role: str = "viewer") -> None:
    """Give ``user_id`` ``role`` on the sample account."""
    await authz.write(grant_tuples(ACCOUNT, user_id, role))


@pytest.fixture
async def fleet(bus: Bus) -> AsyncIterator[None]:
    """Answers ``fleet.mowers.list`` with the sample mowers."""
    registrations = [
        MowerRegistration(
            mower_id=m, account_id=ACCOUNT, name=name, connection=Connection(kind="simulator")
        )
        for m, name in MOWERS.items()
    ]

    async def answer(msg: Any) -> None:
        request = decode(msg.data, MowerListRequest)
        await msg.respond(encode(request.answer(registrations)))

    sub = await bus.nc.subscribe(FLEET_MOWERS_LIST, cb=answer)
    yield
    await sub.unsubscribe()


ServiceFactory = Callable[..., Awaitable[NotificationsService]]


@pytest.fixture
async def make_service(  # noqa: PLR0917 - pytest fixtures
    nats_server: NatsServer,
    bus: Bus,
    pool: asyncpg.Pool,
    migrated: str,
    authorizer: LocalAuthorizer,
    clock: Clock,
    fleet: None,
) -> AsyncIterator[ServiceFactory]:
    """Start replicas (each with its own NATS connection); all stop after the test."""
    started: list[NotificationsService] = []

    async def factory(**overrides: Any) -> NotificationsService:
        options = {k: overrides.pop(k) for k in ("fanout", "seed") if k in overrides}
        # A pool of the service's own, made from its settings (the test's pool otherwise).
        own_pool = overrides.pop("own_pool", False)
        values: dict[str, Any] = {
            "nats_url": nats_server.url,
            "nats_fast_path": fast_path_from_environment(),
            "database_url": migrated,
            "http_port": 0,
            "notifications_state_batch_linger_ms": 5.0,
            "notifications_offline_scan_seconds": 0.05,
            "notifications_fanout_poll_seconds": 0.05,
            "notifications_fanout_lease_seconds": 0.5,
            # No VAPID key here: Web Push has tests of its own (tests/e2e, the delivery worker's).
            "notifications_channels": ["ntfy", "log"],
        }
        values.update(overrides)
        service = NotificationsService(
            NotificationsSettings(**values),
            pool=None if own_pool else pool,
            authorizer=authorizer,
            verifier=TokenVerifier(AUTH),
            clock=clock,
            **options,
        )
        await service.start()
        started.append(service)
        return service

    yield factory
    for service in reversed(started):
        await service.stop()


async def subscribe(stores: Stores, user_id: str, **fields: Any) -> Preferences:
    """Save preferences for ``user_id`` on the sample account (all mowers by default)."""
    prefs = Preferences(**{"scope": "all", **fields})
    await stores.preferences.put_preferences(user_id, ACCOUNT, prefs)
    return prefs


@pytest.fixture
def member(stores: Stores, authorizer: LocalAuthorizer) -> Callable[..., Awaitable[Preferences]]:
    """Make a viewer of the sample account who subscribed with the preferences given."""

    async def make(user_id: str, **fields: Any) -> Preferences:
        await grant(authorizer, user_id)
        return await subscribe(stores, user_id, **fields)

    return make


Member = Callable[..., Awaitable[Preferences]]


async def publish_states(bus: Bus, states: list[MowerState]) -> None:
    """Publish states with fresh msg ids and wait for the stream's acks."""
    acks = [await bus.publish_state(s, msg_id=uuid.uuid4().hex) for s in states]
    await asyncio.gather(*acks)


async def inbox(stores: Stores, user_id: str) -> list[InboxItem]:
    """The user's inbox, newest first."""
    return (await stores.inbox.inbox_page(user_id, 100)).items


class SentFeed:
    """Every ``notifications.sent`` published while the test runs."""

    def __init__(self) -> None:
        self.sent: list[NotificationSent] = []

    async def on_message(self, msg: Any) -> None:
        event = decode_event(msg.data)
        self.sent.append(event.payload)


@pytest.fixture
async def sent(bus: Bus) -> AsyncIterator[SentFeed]:
    """The ``notifications.sent`` feed (core subscription on the subject)."""
    feed = SentFeed()
    sub = await bus.nc.subscribe("event.notifications.sent", cb=feed.on_message)
    yield feed
    await sub.unsubscribe()


def counted(service: NotificationsService, name: str, **labels: str) -> float:
    """A counter's value on the service's registry (0 when never counted)."""
    value = service.metrics_registry.get_sample_value(f"mowdeck_notifications_{name}_total", labels)
    return value or 0.0


def decided(service: NotificationsService) -> float:
    """Every notification the rules and the offline scan decided (committed), any kind."""
    return sum(
        sample.value
        for metric in service.metrics_registry.collect()
        if metric.name == "mowdeck_notifications_events"
        for sample in metric.samples
        if sample.name.endswith("_total")
    )


async def scan_rounds_pass(service: NotificationsService, rounds: int = 3) -> None:
    """Until the offline scan committed ``rounds`` more transactions than now.

    What the scan decides is counted when it commits, so after this a notification it
    was due to decide by the clock as set now is counted (``decided``): the sentinel that
    shows "nothing was decided", where a sleep would only hope so.
    """
    start = counted(service, "offline_scans")
    await eventually(
        lambda: counted(service, "offline_scans") >= start + rounds,
        what=f"{rounds} offline scan rounds",
    )


async def publish_event(bus: Bus, type_: str, payload: msgspec.Struct, at: datetime) -> None:
    """Publish an event of ``type_`` occurred at ``at``."""
    await bus.publish_event(EventEnvelope.new(type_, payload, producer="tests", now=at))
