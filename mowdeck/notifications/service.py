"""The composition root of Notifications: ``NotificationsService(settings, ...)``."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import asyncpg
import structlog
from nats.js import api
from prometheus_client import CollectorRegistry

from actors import Dispatcher, LoopBridge, ShardSupervisor
from contracts.v1.subjects import EVENTS, MOWER_EVENT_FILTER, TELEMETRY
from mowdeck.authn import AuthSettings, TokenVerifier, load_auth_settings, running_denylist
from mowdeck.authz import Authorizer, AuthzSettings, build_authorizer, load_authz_settings
from mowdeck.kit.batching import MicroBatchConsumer
from mowdeck.kit.bus import Bus, NatsCredentials
from mowdeck.kit.consumer import Consumer, ConsumerSpec, settle
from mowdeck.kit.http import HttpServer, Readiness, task_alive
from mowdeck.kit.lifecycle import Resources
from mowdeck.kit.periodic import Periodic
from mowdeck.kit.seed import FleetSeed
from mowdeck.notifications.actor import WatchSnapshots, actor_factory
from mowdeck.notifications.channels.http import open_channel_session
from mowdeck.notifications.channels.loader import NotificationChannels, load_channels
from mowdeck.notifications.consuming import ConsumingSince
from mowdeck.notifications.delivery_metrics import DeliveryMetrics
from mowdeck.notifications.fanout import Decisions, FanOut
from mowdeck.notifications.identity import IdentityEvents, MowerNames
from mowdeck.notifications.ingest import StatePipeline
from mowdeck.notifications.links import LinkEvents, decode_link
from mowdeck.notifications.metrics import NotificationsMetrics
from mowdeck.notifications.offline import OfflineScan
from mowdeck.notifications.outbox import DeliveryWorker
from mowdeck.notifications.ports import NotificationStore
from mowdeck.notifications.postgres import PostgresNotificationStore
from mowdeck.notifications.routes import ApiDeps, create_app
from mowdeck.notifications.settings import NotificationsSettings
from mowdeck.notifications.targets import TargetPolicy
from mowdeck.notifications.targets_routes import TargetDeps

__all__ = ["NotificationsService"]

log = structlog.get_logger("mowdeck.notifications")

STATES_DURABLE = "notifications-states"
LINKS_DURABLE = "notifications-links"
IDENTITY_DURABLE = "notifications-identity"
IDENTITY_FILTER = "event.identity.user.*"
GRANTS_SUBJECT = "event.identity.grants.changed"


def _now() -> datetime:
    return datetime.now(UTC)


class NotificationsService:
    """Notifications: rules over states, the offline timer, the fan-out, the inbox API.

    Stateless: any number of replicas share the queue groups and the database. Pass
    ``bus``, ``pool``, ``store``, ``authorizer`` or ``verifier`` to share them; what is not
    passed is created from the settings and closed again by ``stop()``. ``fanout=False``
    leaves pending events for another replica (tests use it to stop between the rules'
    commit and the fan-out).
    """

    name = "notifications"

    def __init__(
        self,
        settings: NotificationsSettings,
        *,
        auth_settings: AuthSettings | None = None,
        authz_settings: AuthzSettings | None = None,
        bus: Bus | None = None,
        pool: asyncpg.Pool | None = None,
        store: NotificationStore | None = None,
        authorizer: Authorizer | None = None,
        verifier: TokenVerifier | None = None,
        metrics_registry: CollectorRegistry | None = None,
        clock: Callable[[], datetime] = _now,
        seed: bool = True,
        fanout: bool = True,
    ) -> None:
        self.settings = settings
        self._auth_settings = auth_settings
        self._authz_settings = authz_settings
        self._bus = bus
        self.bus: Bus | None = None  # the bus in use, given or owned (after ``start``)
        self._pool = pool
        self.store = store
        self._authorizer = authorizer
        self._verifier = verifier
        self.metrics_registry = (
            metrics_registry if metrics_registry is not None else CollectorRegistry()
        )
        self.metrics = NotificationsMetrics(self.metrics_registry)
        self._clock = clock
        self._seed_enabled = seed
        self._fanout_enabled = fanout
        self.readiness = Readiness()
        self._resources = Resources()
        self._http: HttpServer | None = None
        self._supervisor: ShardSupervisor | None = None
        self.pipeline: StatePipeline | None = None
        self.scan: OfflineScan | None = None
        self.fanout: FanOut | None = None
        self.delivery: DeliveryWorker | None = None
        self.channels: NotificationChannels | None = None
        self.consuming: ConsumingSince | None = None
        self.names: MowerNames | None = None

    @property
    def url(self) -> str:
        """The HTTP base URL (after ``start``)."""
        if self._http is None:
            raise RuntimeError("NotificationsService is not started")
        return self._http.url

    async def start(self) -> None:
        """Connect what was not passed in, start actors, consumers and loops, then listen."""
        try:
            await self._start()
        except BaseException:
            await self.stop()  # releases exactly what was started
            raise

    async def _start(self) -> None:
        s, res = self.settings, self._resources
        self.bus = bus = await res.bus(
            self._bus,
            s.nats_url,
            name="notifications",
            fast_path=s.nats_fast_path,
            credentials=NatsCredentials.from_settings(s),
            user="notifications",
        )
        await res.require_streams(
            bus,
            "notifications",
            readiness=self.readiness,
            registry=self.metrics_registry,
            host=s.http_host,
            port=s.http_port,
        )
        pool = self._pool
        if pool is None and (self.store is None or self._authorizer is None):
            pool = await res.pool(
                None,
                s.database_url,
                min_size=1,
                max_size=s.notifications_db_pool_size,
                server_settings={"timezone": "UTC"},
            )
        if self.store is None:
            assert pool is not None
            self.store = PostgresNotificationStore(pool)
        store = self.store
        authorizer = self._authorizer
        if authorizer is None:
            authorizer = build_authorizer(self._authz_settings or load_authz_settings(), pool)
            res.push(authorizer.close, name="authorizer")
        thresholds, clock = s.thresholds, self._clock
        self.consuming = consuming = ConsumingSince(bus.nc, clock)

        dispatcher = Dispatcher(workers=s.notifications_actor_workers, name="notifications")
        dispatcher.start()
        res.push(lambda: asyncio.to_thread(dispatcher.stop), name="actor dispatcher")
        snapshots = WatchSnapshots(store)
        self._supervisor = supervisor = ShardSupervisor(
            dispatcher, actor_factory(dispatcher, thresholds), snapshots
        )
        res.push(supervisor.stop_all, name="actor supervisor")

        decisions = Decisions(authorizer, s.decision_cache_ttl, clock)
        self.names = names = MowerNames(store, self._forget_actor)
        wake = await self._start_fanout(bus, store, decisions, names)

        seed = FleetSeed(
            bus,
            apply=names.apply,
            remove=names.remove,
            follow_events=True,
            request_timeout=s.notifications_seed_timeout_seconds,
            name="notifications-fleet-seed",
        )
        if self._seed_enabled:
            await seed.start()
            res.push(seed.stop, name="fleet seed")
            self.readiness.watch("fleet seed", lambda: seed.healthy)

        self.pipeline = pipeline = StatePipeline(
            store,
            supervisor=supervisor,
            snapshots=snapshots,
            bridge=LoopBridge(asyncio.get_running_loop()),
            thresholds=thresholds,
            metrics=self.metrics,
            consuming_since=lambda: consuming.since,
            clock=clock,
            on_events=wake,
            batch_max=s.notifications_state_batch_max,
            linger=s.notifications_state_batch_linger_ms / 1000,
        )
        pipeline.start()
        res.push(pipeline.stop, name="state pipeline")
        self.readiness.watch("state pipeline", task_alive(lambda: pipeline.task))
        self.readiness.watch("watch workers", lambda: dispatcher.workers_alive)
        await self._consume(
            bus=bus,
            store=store,
            supervisor=supervisor,
            decisions=decisions,
            pipeline=pipeline,
            wake=wake,
        )

        self.scan = scan = OfflineScan(
            store,
            thresholds=thresholds,
            consuming=consuming,
            metrics=self.metrics,
            clock=clock,
            on_events=wake,
            batch=s.notifications_offline_scan_batch,
        )
        timer = Periodic(
            "notifications-offline-scan", s.notifications_offline_scan_seconds, scan.round
        )
        timer.start()
        res.push(timer.stop, name="offline scan")
        self.readiness.watch("offline scan", task_alive(lambda: timer.task))

        auth = self._auth_settings or load_auth_settings()
        verifier = self._verifier or TokenVerifier(auth)
        # Disabled and deleted users are refused from the moment any service saw the event.
        denylist = await res.enter(running_denylist(bus, auth))
        targets = await self._start_delivery(store)
        deps = ApiDeps(store, authorizer, s, clock, names.account)
        app = create_app(
            deps,
            verifier,
            self.readiness,
            self.metrics_registry,
            targets=targets,
            denylist=denylist,
        )
        self._http = await res.serve(app, s.http_host, s.http_port)
        self.readiness.set_ready()
        log.info("notifications listening", url=self._http.url)

    async def _start_delivery(self, store: NotificationStore) -> TargetDeps:
        """The channels and the delivery worker (the outbox); what the target routes need."""
        s, res = self.settings, self._resources
        session = open_channel_session(s)
        res.push(session.close, name="channel http session")
        self.channels = channels = await load_channels(s, session)
        res.push(channels.close, name="channels")
        self.delivery = worker = DeliveryWorker(
            store, channels, s, DeliveryMetrics(self.metrics_registry), self._clock
        )
        worker.start()
        res.push(worker.stop, name="delivery worker")
        self.readiness.watch("delivery worker", task_alive(lambda: worker.task))
        webpush = channels.get("webpush")
        key = getattr(webpush, "application_server_key", None)
        return TargetDeps(store, TargetPolicy.from_settings(s), key)

    async def _start_fanout(
        self, bus: Bus, store: NotificationStore, decisions: Decisions, names: MowerNames
    ) -> Callable[[], object]:
        """Start the fan-out (unless disabled); returns what wakes it."""
        s = self.settings
        publisher = bus.publisher
        await publisher.start()
        self.fanout = fanout = FanOut(
            store,
            decisions=decisions,
            publisher=publisher,
            names=names.get,
            settings=s,
            metrics=self.metrics,
            clock=self._clock,
            poll=s.notifications_fanout_poll_seconds,
        )
        if not self._fanout_enabled:
            return _nothing
        fanout.start()
        self._resources.push(fanout.stop, name="fan-out")
        self.readiness.watch("fan-out", task_alive(lambda: fanout.task))
        return fanout.wake

    async def _consume(
        self,
        *,
        bus: Bus,
        store: NotificationStore,
        supervisor: ShardSupervisor,
        decisions: Decisions,
        pipeline: StatePipeline,
        wake: Callable[[], object],
    ) -> None:
        s, res = self.settings, self._resources
        assert self.consuming is not None
        consuming = self.consuming
        identity = IdentityEvents(store, decisions)

        async def on_identity(msg: Any) -> None:
            await settle(msg, identity.handle, consumer=IDENTITY_DURABLE)

        links = LinkEvents(
            store,
            supervisor=supervisor,
            thresholds=s.thresholds,
            metrics=self.metrics,
            consuming_since=lambda: consuming.since,
            on_events=wake,
        )
        link_consumer = MicroBatchConsumer(
            bus,
            _spec(EVENTS.name, MOWER_EVENT_FILTER, LINKS_DURABLE),
            decode=decode_link,
            commit=links.commit,
            batch_max=s.notifications_state_batch_max,
            linger=s.notifications_state_batch_linger_ms / 1000,
        )
        await link_consumer.start()
        res.push(link_consumer.stop, name="links consumer")
        self.readiness.watch("links consumer", lambda: link_consumer.alive)
        for name, spec, callback in (
            ("identity", _spec(EVENTS.name, IDENTITY_FILTER, IDENTITY_DURABLE), on_identity),
            # The whole stream, as Telemetry reads it: a filter narrower than the stream's
            # subjects costs JetStream about twice the CPU per delivery; the pipeline
            # acknowledges whatever is not telemetry.mower.<id>.
            (
                "states",
                _spec(TELEMETRY.name, TELEMETRY.subjects[0], STATES_DURABLE),
                pipeline.on_message,
            ),
        ):
            consumer = Consumer(bus, spec, callback)
            await consumer.start()
            res.push(consumer.stop, name=f"{name} consumer")
            self.readiness.watch(f"{name} consumer", _alive(consumer))
        grants = await bus.js.subscribe(
            GRANTS_SUBJECT,
            stream=EVENTS.name,
            ordered_consumer=True,
            deliver_policy=api.DeliverPolicy.NEW,
            cb=identity.on_grants,
        )
        res.push(grants.unsubscribe, name="grants subscription")

    async def _forget_actor(self, mower_id: uuid.UUID) -> None:
        # A removed mower's actor must not keep its watch: a later state starts afresh.
        if self._supervisor is not None:
            await self._supervisor.stop(str(mower_id))

    async def stop(self) -> None:
        """Stop listening and consuming, finish the batch in hand, stop actors and loops,
        close what Notifications owns."""
        self.readiness.set_not_ready("stopping")
        await self._resources.close()


def _nothing() -> None:
    return None


def _spec(stream: str, subject: str, durable: str) -> ConsumerSpec:
    return ConsumerSpec(stream=stream, subject=subject, durable=durable, queue=durable)


def _alive(consumer: Consumer) -> Callable[[], bool]:
    return lambda: consumer.alive
