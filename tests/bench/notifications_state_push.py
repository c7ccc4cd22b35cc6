"""State to push: a state published on the bus to the push received, through the service.

Used by ``tests.bench.notifications_push``; it starts a nats-server and makes a database
of its own. The real Notifications service runs in this process with its production
defaults (micro-batched rules, fan-out with recipient lookups through the in-process
evaluator on PostgreSQL tuples, LISTEN/NOTIFY delivery worker, the webpush channel with real
aes128gcm and VAPID); only the channel list, the VAPID key and the loopback push service
are configured. Every mower first reports a healthy battery (its watch starts, armed);
then one ``battery_low`` state per distinct mower is published at ``rate`` per second,
each firing one notification to the account's subscriber, whose one browser is a local
push service (``TimedReceiver``) noting when each push arrives (by its Topic, one per
mower) and decrypting one in 50.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
from aiohttp import web
from nats.aio.msg import Msg

from contracts.v1 import MowerState, decode_event, encode
from contracts.v1.subjects import MSG_ID_HEADER, telemetry_subject
from mowdeck.authn import AuthSettings, TokenVerifier
from mowdeck.authz import (
    LocalAuthorizer,
    PostgresTupleStore,
    Tuple,
    account_object,
    grant_tuples,
    mower_object,
)
from mowdeck.commands.streams import apply_all
from mowdeck.kit.bus import Bus
from mowdeck.kit.migrate import discover, migrate, sql_root
from mowdeck.notifications.delivery.channels.webpush import push_topic
from mowdeck.notifications.delivery.targets import TargetPolicy, validate_target
from mowdeck.notifications.inbox.preferences import Preferences
from mowdeck.notifications.infra import Stores
from mowdeck.notifications.ingest.states import STATES_DURABLE
from mowdeck.notifications.service import NotificationsService
from mowdeck.notifications.settings import NotificationsSettings
from tests.bench.notifications import drained
from tests.support.natsserver import NatsServer
from tests.support.postgres import create_database, drop_database
from tests.support.webpush_receiver import WebPushReceiver

AUTH = AuthSettings(jwt_secret="notifications-push-benchmark-secret-0123456789")
MOWERS_PER_ACCOUNT = 10


class TimedReceiver(WebPushReceiver):
    """Notes when each push (by its Topic, one per mower) arrives."""

    def __init__(self) -> None:
        super().__init__(sample_every=50)
        self.arrived: dict[str, float] = {}

    async def _push(self, request: web.Request) -> web.StreamResponse:
        self.arrived.setdefault(request.headers.get("Topic", ""), time.perf_counter())
        return await super()._push(request)


@dataclass
class Latency:
    """State publish to push received, over every firing state."""

    expected: int
    count: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    lag_ms: float
    inbox_p50_ms: float
    inbox_p99_ms: float
    decrypted: int
    problems: list[str]


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _state(mower: uuid.UUID, account: uuid.UUID, battery: int, at: datetime) -> MowerState:
    return MowerState(
        mower_id=mower,
        account_id=account,
        observed_at=at,
        activity="idle",
        battery=battery,
        charging=False,
    )


async def _publish(bus: Bus, state: MowerState) -> None:
    # As the gateway does: a core publish the TELEMETRY stream stores, deduplicated by id.
    await bus.nc.publish(
        telemetry_subject(state.mower_id),
        encode(state),
        headers={MSG_ID_HEADER: f"{state.mower_id}:{state.observed_at.timestamp()}"},
    )


async def run_state_to_push(rate: float, seconds: float) -> Latency:
    """``rate`` firing states per second for ``seconds``; publish-to-push latencies."""
    server = NatsServer()
    server.start()
    dsn = await asyncio.to_thread(create_database, "mowdeck_bench")
    try:
        await migrate(dsn, discover(sql_root(), ["notifications", "authz"]))
        bus = await Bus.connect(server.url, name="bench-push")
        pool = await asyncpg.create_pool(dsn, min_size=2, max_size=16)
        try:
            await apply_all(bus)  # the admin step (mowdeck streams)
            return await _measure(bus, pool, server.url, dsn, rate=rate, seconds=seconds)
        finally:
            await pool.close()
            await bus.drain()
    finally:
        server.stop()
        await asyncio.to_thread(drop_database, dsn)


async def _measure(
    bus: Bus, pool: asyncpg.Pool, nats_url: str, dsn: str, *, rate: float, seconds: float
) -> Latency:
    count = int(rate * seconds)
    mowers = [uuid.uuid4() for _ in range(count)]
    accounts = [uuid.uuid4() for _ in range(-(-count // MOWERS_PER_ACCOUNT))]
    owner = {m: accounts[i // MOWERS_PER_ACCOUNT] for i, m in enumerate(mowers)}
    stores = Stores.postgres(pool)
    authorizer = LocalAuthorizer(PostgresTupleStore(pool))
    receiver = TimedReceiver()
    async with receiver:
        with tempfile.TemporaryDirectory() as keys:
            settings = NotificationsSettings(
                nats_url=nats_url,
                database_url=dsn,
                http_port=0,
                log_level="warning",
                notifications_channels=["webpush"],
                notifications_vapid_key_file=str(Path(keys) / "vapid.pem"),
                notifications_vapid_subject="mailto:bench@mowdeck.example",
                notifications_push_hosts=["127.0.0.1"],
                notifications_insecure_hosts=["127.0.0.1"],
            )
            policy = TargetPolicy.from_settings(settings)
            tuples = [Tuple(account_object(owner[m]), "account", mower_object(m)) for m in mowers]
            for account in accounts:
                user = f"{account}-owner"
                tuples += grant_tuples(account, user, "viewer")
                await stores.preferences.put_preferences(user, account, Preferences(scope="all"))
                doc = {"channel": "webpush", "subscription": receiver.subscribe().to_json()}
                target = validate_target(doc, policy)
                assert not isinstance(target, list), target
                await stores.targets.add_target(user, target)
            await authorizer.write(tuples)
            service = NotificationsService(
                settings,
                bus=bus,
                pool=pool,
                authorizer=authorizer,
                verifier=TokenVerifier(AUTH),
                seed=False,
            )
            await service.start()
            try:
                return await _drive(bus, receiver, mowers, owner, rate)
            finally:
                await service.stop()


async def _drive(
    bus: Bus,
    receiver: TimedReceiver,
    mowers: list[uuid.UUID],
    owner: dict[uuid.UUID, uuid.UUID],
    rate: float,
) -> Latency:
    # Every watch starts armed: the first state of a mower is old news, never notified.
    now = datetime.now(UTC)
    for i, m in enumerate(mowers):
        await _publish(bus, _state(m, owner[m], 80, now - timedelta(seconds=5)))
        if i % 200 == 0:
            await asyncio.sleep(0)
    await bus.nc.flush()
    await asyncio.wait_for(drained(bus, STATES_DURABLE, len(mowers)), 120)
    topics = {m: push_topic("battery_low", str(m)) for m in mowers}
    told: dict[str, float] = {}

    async def on_sent(msg: Msg) -> None:
        mower = str(decode_event(msg.data).payload.mower_id)
        told.setdefault(push_topic("battery_low", mower), time.perf_counter())

    feed = await bus.nc.subscribe("event.notifications.sent", cb=on_sent)
    published: dict[str, float] = {}
    lag = 0.0
    loop = asyncio.get_running_loop()
    began = loop.time()
    for i, m in enumerate(mowers):
        wait = began + i / rate - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        lag = max(lag, -wait)
        state = _state(m, owner[m], 15, datetime.now(UTC))
        published[topics[m]] = time.perf_counter()
        await _publish(bus, state)
    deadline = time.perf_counter() + 30
    while len(receiver.arrived) < len(mowers) and time.perf_counter() < deadline:
        await asyncio.sleep(0.05)
    await feed.unsubscribe()
    latencies = [
        (receiver.arrived[t] - p) * 1000 for t, p in published.items() if t in receiver.arrived
    ]
    inbox = [(told[t] - p) * 1000 for t, p in published.items() if t in told]
    return Latency(
        expected=len(mowers),
        count=len(latencies),
        p50_ms=_quantile(latencies, 0.5),
        p99_ms=_quantile(latencies, 0.99),
        max_ms=max(latencies, default=float("nan")),
        lag_ms=lag * 1000,
        inbox_p50_ms=_quantile(inbox, 0.5),
        inbox_p99_ms=_quantile(inbox, 0.99),
        decrypted=receiver.decrypted,
        problems=receiver.problems[:5],
    )
