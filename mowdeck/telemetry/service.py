"""The composition root of Telemetry: ``TelemetryService(settings, ...)``, ``start``, ``stop``."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import asyncpg
from prometheus_client import CollectorRegistry

from actors import Dispatcher, LoopBridge, ShardSupervisor
from contracts.v1.subjects import (
    COMMANDS,
    EVENTS,
    MOWER_EVENT_FILTER,
    RESULT_FILTER,
    TELEMETRY,
)
from mowdeck.authn import AuthSettings, TokenVerifier, load_auth_settings, running_denylist
from mowdeck.authz import Authorizer, AuthzSettings
from mowdeck.kit.bus import Bus
from mowdeck.kit.consumer import Consumer, ConsumerSpec, DirectConsumer, settle
from mowdeck.kit.garbage_collector import GcPauses
from mowdeck.kit.http import task_alive
from mowdeck.kit.seed import seed_healthy
from mowdeck.kit.shell import ServiceShell
from mowdeck.telemetry.actor import LatestRowSnapshots, actor_factory
from mowdeck.telemetry.directory import DirectoryEvents, seed_directory
from mowdeck.telemetry.fingerprint import Rules
from mowdeck.telemetry.ingest import StateBatcher
from mowdeck.telemetry.metrics import TelemetryMetrics
from mowdeck.telemetry.ports import TelemetryStore
from mowdeck.telemetry.postgres import PostgresTelemetryStore, pool_options
from mowdeck.telemetry.results import ResultHandler
from mowdeck.telemetry.retention import Retention
from mowdeck.telemetry.routes import QueryDeps, create_app
from mowdeck.telemetry.settings import TelemetrySettings

__all__ = ["TelemetryService"]


STATES_DURABLE = "telemetry-states"
STATES_SUBJECT = TELEMETRY.subjects[0]
RESULTS_DURABLE = "telemetry-results"
DIRECTORY_DURABLE = "telemetry-directory"


def _now() -> datetime:
    return datetime.now(UTC)


class TelemetryService(ServiceShell[TelemetrySettings]):
    """Telemetry: state ingest, command timeline, mower directory, retention and queries.

    Stateless: any number of replicas share the queue groups and the database. Pass
    ``bus``, ``pool``, ``authorizer``, ``verifier`` or ``store`` to share them; what is not
    passed is created from the settings and closed again by ``stop()``.
    """

    name = "telemetry"

    def __init__(
        self,
        settings: TelemetrySettings,
        *,
        auth_settings: AuthSettings | None = None,
        authz_settings: AuthzSettings | None = None,
        bus: Bus | None = None,
        pool: asyncpg.Pool | None = None,
        store: TelemetryStore | None = None,
        authorizer: Authorizer | None = None,
        verifier: TokenVerifier | None = None,
        metrics_registry: CollectorRegistry | None = None,
        clock: Callable[[], datetime] = _now,
        seed: bool = True,
        retention: bool = True,
        on_actors_started: Callable[[int], object] | None = None,
    ) -> None:
        """``on_actors_started(count)`` hears of every ingest batch that started actors
        (the process's command uses it to freeze what lives after start-up)."""
        super().__init__(settings, metrics_registry)
        self._auth_settings = auth_settings
        self._authz_settings = authz_settings
        self._bus = bus
        self.bus: Bus | None = None  # the bus in use, given or owned (after ``start``)
        self._pool = pool
        self.store = store
        self._authorizer = authorizer
        self._verifier = verifier
        self.gc_pauses = GcPauses(self.metrics_registry)
        self.metrics = TelemetryMetrics(self.metrics_registry)
        self._clock = clock
        self._seed_enabled = seed
        self._retention_enabled = retention
        self._on_actors_started = on_actors_started
        self._supervisor: ShardSupervisor | None = None
        self.batcher: StateBatcher | None = None
        self.retention: Retention | None = None
        self._seed_task: asyncio.Task[int] | None = None

    @property
    def seeded(self) -> asyncio.Task[int] | None:
        """The directory seed task (done once Fleet answered)."""
        return self._seed_task

    async def _start(self) -> None:
        # Connect what was not passed in, start consumers and timers, then listen.
        s, res = self.settings, self._resources
        self.gc_pauses.install()
        res.push_sync(self.gc_pauses.uninstall, name="gc pauses")
        self.bus = bus = await res.bus_for(
            self._bus, s, user="telemetry", readiness=self.readiness, registry=self.metrics_registry
        )
        pool = self._pool
        if pool is None and (self.store is None or self._authorizer is None):
            options = pool_options(
                s.telemetry_db_pool_size, statement_timeout_ms=s.database_statement_timeout_ms
            )
            pool = await res.pool(None, s.database_url, **options)
        if self.store is None:
            assert pool is not None
            self.store = PostgresTelemetryStore(
                pool,
                s.database_url,
                maintenance_timeout_ms=s.database_maintenance_statement_timeout_ms,
            )
        store = self.store
        authorizer = res.authorizer(self._authorizer, self._authz_settings, pool)
        auth = self._auth_settings or load_auth_settings()
        verifier = self._verifier or TokenVerifier(auth)
        denylist = await res.enter(running_denylist(bus, auth))

        rules = Rules(heartbeat=s.heartbeat, max_clock_skew=s.max_clock_skew)
        dispatcher = Dispatcher(
            workers=s.telemetry_actor_workers, name="telemetry", metrics=self.metrics.actors
        )
        dispatcher.start()
        res.push(lambda: asyncio.to_thread(dispatcher.stop), name="actor dispatcher")
        snapshots = LatestRowSnapshots(store)
        self._supervisor = supervisor = ShardSupervisor(
            dispatcher, actor_factory(dispatcher, rules), snapshots, metrics=self.metrics.actors
        )
        res.push(supervisor.stop_all, name="actor supervisor")
        self.batcher = batcher = StateBatcher(
            store,
            supervisor=supervisor,
            snapshots=snapshots,
            bridge=LoopBridge(asyncio.get_running_loop()),
            rules=rules,
            metrics=self.metrics,
            batch_max=s.telemetry_batch_max,
            linger=s.telemetry_batch_linger_ms / 1000,
            on_actors_started=self._on_actors_started,
        )
        batcher.start()
        res.push(batcher.stop, name="state batcher")
        await self._consume(bus, store, batcher)
        if self._seed_enabled:
            self._seed_task = asyncio.get_running_loop().create_task(
                seed_directory(
                    bus,
                    store,
                    timeout=s.telemetry_seed_timeout_seconds,
                    retry_max=s.telemetry_seed_retry_max_seconds,
                ),
                name="telemetry-directory-seed",
            )
            res.push_task(self._seed_task, name="directory seed")
        self.retention = retention = Retention(store, s, self.metrics, clock=self._clock)
        if self._retention_enabled:
            retention.start()
        res.push(retention.stop, name="retention")  # also when a test started it

        watch = self.readiness.watch
        watch("state batcher", task_alive(lambda: batcher.task))
        watch("fingerprint workers", lambda: dispatcher.workers_alive)
        watch("directory seed", seed_healthy(lambda: self._seed_task))
        deps = QueryDeps(store, authorizer, s, self.metrics, self._clock)
        app = create_app(deps, verifier, self.readiness, self.metrics_registry, denylist)
        await self._listen(app)

    async def _consume(self, bus: Bus, store: TelemetryStore, batcher: StateBatcher) -> None:
        s = self.settings
        results = ResultHandler(
            store,
            self.metrics,
            unknown_attempts=s.telemetry_unknown_mower_attempts,
            retry_delay=s.telemetry_unknown_mower_retry_seconds,
        )
        directory = DirectoryEvents(store, self.metrics, on_removed=self._forget)

        async def on_result(msg: Any) -> None:
            await settle(msg, results.handle, consumer=RESULTS_DURABLE)

        async def on_event(msg: Any) -> None:
            await settle(msg, directory.handle, consumer=DIRECTORY_DURABLE)

        # The states: the whole stream, not TELEMETRY_FILTER (a filter narrower than the
        # stream's subjects costs JetStream about twice the CPU per delivered message, file
        # store; the batcher acknowledges anything that is not telemetry.mower.<id>), read
        # directly on the connection's read loop: the batcher only queues each delivery.
        events = _spec(EVENTS.name, MOWER_EVENT_FILTER, DIRECTORY_DURABLE)
        results_spec = _spec(COMMANDS.name, RESULT_FILTER, RESULTS_DURABLE)
        states = _spec(TELEMETRY.name, STATES_SUBJECT, STATES_DURABLE)
        for name, consumer in (
            ("events", Consumer(bus, events, on_event)),
            ("results", Consumer(bus, results_spec, on_result)),
            ("states", DirectConsumer(bus, states, batcher.take)),
        ):
            await consumer.start()
            self._resources.push(consumer.stop, name=f"{name} consumer")
            self.readiness.watch(f"{name} consumer", _alive(consumer))

    async def _forget(self, mower_id: uuid.UUID) -> None:
        # A removed mower's actor must not keep its memory: a later state starts afresh.
        if self._supervisor is not None:
            await self._supervisor.stop(str(mower_id))


def _spec(stream: str, subject: str, durable: str) -> ConsumerSpec:
    return ConsumerSpec(stream=stream, subject=subject, durable=durable, queue=durable)


def _alive(consumer: Consumer) -> Callable[[], bool]:
    return lambda: consumer.alive
