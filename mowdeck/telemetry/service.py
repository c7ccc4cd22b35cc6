"""The composition root of Telemetry: ``TelemetryService(settings, ...)``, ``start``, ``stop``."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import asyncpg
import structlog
from prometheus_client import CollectorRegistry

from actors import Dispatcher, LoopBridge, ShardSupervisor
from contracts.v1.subjects import (
    COMMANDS,
    EVENTS,
    MOWER_EVENT_FILTER,
    RESULT_FILTER,
    TELEMETRY,
)
from mowdeck.authn import AuthSettings, TokenVerifier, load_auth_settings
from mowdeck.authz import Authorizer, AuthzSettings, build_authorizer, load_authz_settings
from mowdeck.kit.bus import Bus
from mowdeck.kit.collector import GcPauses, set_young_threshold
from mowdeck.kit.consumer import Consumer, ConsumerSpec, settle
from mowdeck.kit.http import HttpServer, Readiness, task_alive
from mowdeck.telemetry.actor import LatestRowSnapshots, actor_factory
from mowdeck.telemetry.directory import DirectoryEvents, seed_directory
from mowdeck.telemetry.fingerprint import Rules
from mowdeck.telemetry.ingest import StateBatcher
from mowdeck.telemetry.metrics import TelemetryMetrics
from mowdeck.telemetry.ports import TelemetryStore
from mowdeck.telemetry.postgres import PostgresTelemetryStore, create_pool
from mowdeck.telemetry.results import ResultHandler
from mowdeck.telemetry.retention import Retention
from mowdeck.telemetry.routes import QueryDeps, create_app
from mowdeck.telemetry.settings import TelemetrySettings

__all__ = ["TelemetryService", "configure_gc"]

log = structlog.get_logger("mowdeck.telemetry")

STATES_DURABLE = "telemetry-states"
STATES_SUBJECT = TELEMETRY.subjects[0]
RESULTS_DURABLE = "telemetry-results"
DIRECTORY_DURABLE = "telemetry-directory"


def _now() -> datetime:
    return datetime.now(UTC)


class TelemetryService:
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
        registry: CollectorRegistry | None = None,
        clock: Callable[[], datetime] = _now,
        seed: bool = True,
        retention: bool = True,
    ) -> None:
        self.settings = settings
        self._auth_settings = auth_settings
        self._authz_settings = authz_settings
        self._bus = bus
        self._pool = pool
        self.store = store
        self._authorizer = authorizer
        self._verifier = verifier
        self.registry = registry if registry is not None else CollectorRegistry()
        self._gc_pauses = GcPauses(self.registry)
        self.metrics = TelemetryMetrics(self.registry)
        self._clock = clock
        self._seed_enabled = seed
        self._retention_enabled = retention
        self.readiness = Readiness()
        self._owned: list[Callable[[], Any]] = []
        self._consumers: list[Consumer] = []
        self._http: HttpServer | None = None
        self._dispatcher: Dispatcher | None = None
        self._supervisor: ShardSupervisor | None = None
        self.batcher: StateBatcher | None = None
        self.retention: Retention | None = None
        self._seed_task: asyncio.Task[int] | None = None

    @property
    def url(self) -> str:
        """The HTTP base URL (after ``start``)."""
        if self._http is None:
            raise RuntimeError("TelemetryService is not started")
        return self._http.url

    @property
    def seeded(self) -> asyncio.Task[int] | None:
        """The directory seed task (done once Fleet answered)."""
        return self._seed_task

    async def start(self) -> None:
        """Connect what was not passed in, start consumers and timers, then listen."""
        self._gc_pauses.install()
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        s = self.settings
        if self._bus is None:
            self._bus = await Bus.connect(s.nats_url, name="telemetry", fast_path=s.nats_fast_path)
            self._owned.append(self._bus.drain)
        bus = self._bus
        await bus.ensure_streams()
        if self._pool is None and (self.store is None or self._authorizer is None):
            self._pool = await create_pool(s.database_url, max_size=s.telemetry_db_pool_size)
            self._owned.append(self._pool.close)
        if self.store is None:
            assert self._pool is not None
            self.store = PostgresTelemetryStore(self._pool, s.database_url)
        store = self.store
        if self._authorizer is None:
            self._authorizer = build_authorizer(
                self._authz_settings or load_authz_settings(), self._pool
            )
            self._owned.append(self._authorizer.close)
        verifier = self._verifier or TokenVerifier(self._auth_settings or load_auth_settings())

        rules = Rules(heartbeat=s.heartbeat, max_clock_skew=s.max_clock_skew)
        self._dispatcher = dispatcher = Dispatcher(
            workers=s.telemetry_actor_workers, name="telemetry"
        )
        dispatcher.start()
        snapshots = LatestRowSnapshots(store)
        self._supervisor = supervisor = ShardSupervisor(
            dispatcher, actor_factory(dispatcher, rules), snapshots
        )
        bridge = LoopBridge(asyncio.get_running_loop())
        self.batcher = batcher = StateBatcher(
            store,
            supervisor=supervisor,
            snapshots=snapshots,
            bridge=bridge,
            rules=rules,
            metrics=self.metrics,
            batch_max=s.telemetry_batch_max,
            linger=s.telemetry_batch_linger_ms / 1000,
        )
        batcher.start()
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

        for spec, callback in (
            (_spec(EVENTS.name, MOWER_EVENT_FILTER, DIRECTORY_DURABLE), on_event),
            (_spec(COMMANDS.name, RESULT_FILTER, RESULTS_DURABLE), on_result),
            # The whole stream, not TELEMETRY_FILTER: a filter narrower than the stream's
            # subjects costs JetStream about twice the CPU per delivered message (file
            # store); the batcher acknowledges anything that is not telemetry.mower.<id>.
            (_spec(TELEMETRY.name, STATES_SUBJECT, STATES_DURABLE), batcher.on_message),
        ):
            consumer = Consumer(bus, spec, callback)
            await consumer.start()
            self._consumers.append(consumer)
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
        self.retention = Retention(store, s, self.metrics, clock=self._clock)
        if self._retention_enabled:
            self.retention.start()

        watch = self.readiness.watch
        for name, consumer in zip(("events", "results", "states"), self._consumers, strict=True):
            watch(f"{name} consumer", _alive(consumer))
        watch("state batcher", task_alive(lambda: batcher.task))
        watch("fingerprint workers", lambda: dispatcher.workers_alive)
        deps = QueryDeps(store, self._authorizer, s, self.metrics, self._clock)
        app = create_app(deps, verifier, self.readiness, self.registry)
        self._http = HttpServer(app, s.http_host, s.http_port)
        await self._http.start()
        self.readiness.set_ready()
        log.info("telemetry listening", url=self._http.url)

    async def _forget(self, mower_id: uuid.UUID) -> None:
        # A removed mower's actor must not keep its memory: a later state starts afresh.
        if self._supervisor is not None:
            await self._supervisor.stop(str(mower_id))

    async def stop(self) -> None:
        """Stop consuming, finish the batch in hand, stop actors and timers, close what we own."""
        self.readiness.set_not_ready("stopping")
        self._gc_pauses.uninstall()
        for consumer in reversed(self._consumers):
            await consumer.stop()
        self._consumers.clear()
        if self.batcher is not None:
            await self.batcher.stop()
            self.batcher = None
        if self._seed_task is not None:
            self._seed_task.cancel()
            with contextlib.suppress(BaseException):
                await self._seed_task
        if self.retention is not None:
            await self.retention.stop()
        if self._http is not None:
            await self._http.stop()
            self._http = None
        if self._supervisor is not None:
            await self._supervisor.stop_all()
            self._supervisor = None
        if self._dispatcher is not None:
            await asyncio.to_thread(self._dispatcher.stop)
            self._dispatcher = None
        for close in reversed(self._owned):
            try:
                await close()
            except Exception:
                log.exception("close failed")
        self._owned.clear()


def configure_gc(settings: TelemetrySettings) -> None:
    """Apply ``telemetry_gc_young_threshold`` to this process (the CLI's composition root)."""
    set_young_threshold(settings.telemetry_gc_young_threshold)


def _spec(stream: str, subject: str, durable: str) -> ConsumerSpec:
    return ConsumerSpec(stream=stream, subject=subject, durable=durable, queue=durable)


def _alive(consumer: Consumer) -> Callable[[], bool]:
    return lambda: consumer.alive
