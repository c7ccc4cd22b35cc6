"""The composition root of Notifications: ``NotificationsService(settings, ...)``."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg
from prometheus_client import CollectorRegistry

from actors import ShardSupervisor
from mowdeck.authn import AuthSettings, TokenVerifier, load_auth_settings, running_denylist
from mowdeck.authz import Authorizer, AuthzSettings, DecisionCache
from mowdeck.kit.bus import Bus
from mowdeck.kit.garbage_collector import GcPauses
from mowdeck.kit.http import task_alive
from mowdeck.kit.seed import FleetSeed
from mowdeck.kit.shell import ServiceShell
from mowdeck.notifications.consumers import STATES_DURABLE, Consumers, start_consumers
from mowdeck.notifications.delivery.channels.http import open_channel_session
from mowdeck.notifications.delivery.channels.loader import NotificationChannels, load_channels
from mowdeck.notifications.delivery.limits import target_creations
from mowdeck.notifications.delivery.memory import InMemoryDeliveries
from mowdeck.notifications.delivery.metrics import DeliveryMetrics
from mowdeck.notifications.delivery.ports import DeliveryStore, TargetStore
from mowdeck.notifications.delivery.postgres import PostgresDeliveries, queue_deliveries
from mowdeck.notifications.delivery.routes import TargetDeps
from mowdeck.notifications.delivery.targets import TargetPolicy
from mowdeck.notifications.delivery.worker import DeliveryWorker
from mowdeck.notifications.engine import (
    Engine,
    start_offline_scan,
    start_pipeline,
    start_watch_actors,
)
from mowdeck.notifications.inbox.erasure import InMemoryErasure, PostgresErasure
from mowdeck.notifications.inbox.fanout import FanOut
from mowdeck.notifications.inbox.memory import InMemoryInbox
from mowdeck.notifications.inbox.names import MowerNames
from mowdeck.notifications.inbox.ports import Erasure, InboxStore, PendingStore, PreferencesStore
from mowdeck.notifications.inbox.postgres import PostgresInbox
from mowdeck.notifications.inbox.routes import ApiDeps, create_app
from mowdeck.notifications.ingest.consuming import ConsumingSince
from mowdeck.notifications.ingest.memory import InMemoryWatches
from mowdeck.notifications.ingest.offline import OfflineScan
from mowdeck.notifications.ingest.ports import WatchStore
from mowdeck.notifications.ingest.postgres import PostgresWatches
from mowdeck.notifications.ingest.states import StatePipeline
from mowdeck.notifications.metrics import NotificationsMetrics
from mowdeck.notifications.pg import pool_options
from mowdeck.notifications.rules.events import RuleEvent
from mowdeck.notifications.settings import NotificationsSettings

__all__ = ["STATES_DURABLE", "NotificationsService", "Stores"]


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Stores:
    """The parts' store ports, on one database (or in one process's memory).

    Wired to each other where one transaction spans two parts: the watches' transaction
    writes the inbox's pending events, the inbox's fan-out write queues the deliveries,
    the erasure deletes in every part (``ingest.ports``, ``inbox.ports`` say why).
    """

    watches: WatchStore
    pending: PendingStore
    inbox: InboxStore
    preferences: PreferencesStore
    erasure: Erasure
    targets: TargetStore
    deliveries: DeliveryStore

    @classmethod
    def postgres(cls, pool: asyncpg.Pool, *, maintenance_timeout_ms: int | None = None) -> Stores:
        """The stores on ``pool``; pruning gets ``maintenance_timeout_ms`` (None: the pool's)."""
        deliveries = PostgresDeliveries(pool, maintenance_timeout_ms=maintenance_timeout_ms)
        inbox = PostgresInbox(pool, deliveries=queue_deliveries)
        watches = PostgresWatches(pool, pending=inbox.insert_pending)
        erasure = PostgresErasure(pool, [deliveries, watches, inbox])
        return cls(watches, inbox, inbox, inbox, erasure, deliveries, deliveries)

    @classmethod
    def in_memory(cls) -> Stores:
        """The stores in this process's memory (unit tests)."""

        def queue(event: RuleEvent, items: Sequence[tuple[str, bool]]) -> None:
            # The inbox queues into the deliveries, which read the inbox's preferences.
            deliveries.queue(event, items)

        inbox = InMemoryInbox(deliveries=queue)
        deliveries = InMemoryDeliveries(preferences=inbox.preferences_of)
        watches = InMemoryWatches(pending=inbox.add_pending)
        erasure = InMemoryErasure([deliveries, watches, inbox])
        return cls(watches, inbox, inbox, inbox, erasure, deliveries, deliveries)


class NotificationsService(ServiceShell[NotificationsSettings]):
    """Notifications: rules over states, the offline timer, the fan-out, the inbox API.

    Stateless: any number of replicas share the queue groups and the database. Pass
    ``bus``, ``pool``, ``stores``, ``authorizer`` or ``verifier`` to share them; what is not
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
        stores: Stores | None = None,
        authorizer: Authorizer | None = None,
        verifier: TokenVerifier | None = None,
        metrics_registry: CollectorRegistry | None = None,
        clock: Callable[[], datetime] = _now,
        seed: bool = True,
        fanout: bool = True,
        on_actors_started: Callable[[int], object] | None = None,
    ) -> None:
        """``on_actors_started(count)`` hears of every state batch that started actors
        (the process's command uses it to freeze what lives after start-up)."""
        super().__init__(settings, metrics_registry)
        self._auth_settings = auth_settings
        self._authz_settings = authz_settings
        self._bus = bus
        self.bus: Bus | None = None  # the bus in use, given or owned (after ``start``)
        self._pool = pool
        self.stores = stores
        self._authorizer = authorizer
        self._verifier = verifier
        self.gc_pauses = GcPauses(self.metrics_registry)
        self.metrics = NotificationsMetrics(self.metrics_registry)
        self._clock = clock
        self._on_actors_started = on_actors_started
        self._seed_enabled = seed
        self._fanout_enabled = fanout
        self._supervisor: ShardSupervisor | None = None
        self.pipeline: StatePipeline | None = None
        self.scan: OfflineScan | None = None
        self.fanout: FanOut | None = None
        self.delivery: DeliveryWorker | None = None
        self.channels: NotificationChannels | None = None
        self.consuming: ConsumingSince | None = None
        self.names: MowerNames | None = None

    async def _start(self) -> None:
        # Connect what was not passed in, start actors, consumers and loops, then listen.
        s, res = self.settings, self._resources
        self.gc_pauses.install()
        res.push_sync(self.gc_pauses.uninstall, name="gc pauses")
        self.bus = bus = await res.bus_for(
            self._bus,
            s,
            user="notifications",
            readiness=self.readiness,
            registry=self.metrics_registry,
        )
        pool = self._pool
        if pool is None and (self.stores is None or self._authorizer is None):
            options = pool_options(
                s.notifications_db_pool_size, statement_timeout_ms=s.database_statement_timeout_ms
            )
            pool = await res.pool(None, s.database_url, **options)
        if self.stores is None:
            assert pool is not None
            self.stores = Stores.postgres(
                pool, maintenance_timeout_ms=s.database_maintenance_statement_timeout_ms
            )
        stores = self.stores
        authorizer = res.authorizer(self._authorizer, self._authz_settings, pool)
        clock = self._clock
        self.consuming = consuming = ConsumingSince(bus.nc, clock)
        actors = start_watch_actors(stores.watches, s, res)
        self._supervisor = actors.supervisor

        ttl = s.decision_cache_ttl.total_seconds()
        decisions = DecisionCache(authorizer, ttl, clock=lambda: clock().timestamp())
        self.names = names = MowerNames(stores.erasure, self._forget_actor)
        wake = await self._start_fanout(bus, stores, decisions, names)
        if self._seed_enabled:
            seed = FleetSeed(
                bus,
                apply=names.apply,
                remove=names.remove,
                follow_events=True,
                request_timeout=s.notifications_seed_timeout_seconds,
                name="notifications-fleet-seed",
            )
            await seed.start()
            res.push(seed.stop, name="fleet seed")
            self.readiness.watch("fleet seed", lambda: seed.healthy)

        engine = Engine(stores.watches, s, self.metrics, consuming, clock, wake)
        self.pipeline = pipeline = start_pipeline(
            engine, actors, res, self.readiness, self._on_actors_started
        )
        parts = Consumers(
            stores.watches,
            stores.erasure,
            actors.supervisor,
            decisions,
            pipeline,
            consuming,
            self.metrics,
            wake,
        )
        await start_consumers(bus, s, parts, res, self.readiness)
        self.scan = start_offline_scan(engine, res, self.readiness)

        auth = self._auth_settings or load_auth_settings()
        verifier = self._verifier or TokenVerifier(auth)
        # Disabled and deleted users are refused from the moment any service saw the event.
        denylist = await res.enter(running_denylist(bus, auth))
        targets = await self._start_delivery(stores)
        deps = ApiDeps(stores.inbox, stores.preferences, authorizer, s, clock, names.account)
        app = create_app(
            deps,
            verifier,
            self.readiness,
            self.metrics_registry,
            targets=targets,
            denylist=denylist,
        )
        await self._listen(app)

    async def _start_delivery(self, stores: Stores) -> TargetDeps:
        """The channels and the delivery worker ; what the target routes need."""
        s, res = self.settings, self._resources
        session = open_channel_session(s)
        res.push(session.close, name="channel http session")
        self.channels = channels = await load_channels(s, session)
        res.push(channels.close, name="channels")
        self.delivery = worker = DeliveryWorker(
            stores.deliveries, channels, s, DeliveryMetrics(self.metrics_registry), self._clock
        )
        worker.start()
        res.push(worker.stop, name="delivery worker")
        self.readiness.watch("delivery worker", task_alive(lambda: worker.task))
        webpush = channels.get("webpush")
        key = getattr(webpush, "application_server_key", None)
        creations = target_creations(s, self.metrics_registry)
        return TargetDeps(stores.targets, TargetPolicy.from_settings(s), key, creations=creations)

    async def _start_fanout(
        self, bus: Bus, stores: Stores, decisions: DecisionCache, names: MowerNames
    ) -> Callable[[], object]:
        """Start the fan-out (unless disabled); returns what wakes it."""
        s = self.settings
        publisher = bus.publisher
        await publisher.start()
        self.fanout = fanout = FanOut(
            stores.pending,
            stores.preferences,
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

    async def _forget_actor(self, mower_id: uuid.UUID) -> None:
        # A removed mower's actor must not keep its watch: a later state starts afresh.
        if self._supervisor is not None:
            await self._supervisor.stop(str(mower_id))


def _nothing() -> None:
    return None
