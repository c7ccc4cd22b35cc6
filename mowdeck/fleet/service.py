"""The composition root of Fleet: ``FleetService(settings, ...)`` with ``start``/``stop``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection
from datetime import UTC, datetime
from typing import Any

import asyncpg
import structlog
from aiohttp import web
from nats.aio.msg import Msg
from prometheus_client import CollectorRegistry

from contracts.v1.subjects import MOWER_EVENT_FILTER
from mowdeck.authn import AuthSettings, TokenVerifier, auth_middleware, load_auth_settings
from mowdeck.authz import Authorizer, AuthzSettings, build_authorizer, load_authz_settings
from mowdeck.fleet.caches import CachedAuthorizer, CachedTokenVerifier, RecordCache
from mowdeck.fleet.commands import ResultRecorder, ResultWaiters
from mowdeck.fleet.issuing import CommandJournal, CommandPublisher
from mowdeck.fleet.listing import MowerListResponder
from mowdeck.fleet.outbox import OutboxMetrics, OutboxRelay, bus_publisher
from mowdeck.fleet.postgres import PostgresCommandLog, PostgresMowerRepository, PostgresPruning
from mowdeck.fleet.pruning import Pruner
from mowdeck.fleet.routes import (
    FLEET,
    HttpMetrics,
    fleet_errors,
    metrics_middleware,
    routes,
)
from mowdeck.fleet.settings import FleetSettings
from mowdeck.fleet.usecases import Fleet, FleetMetrics
from mowdeck.gateway.connections.registry import ENTRY_POINT_GROUP, ConnectionRegistry
from mowdeck.kit.bus import Bus
from mowdeck.kit.collector import GcPauses
from mowdeck.kit.http import (
    HttpServer,
    Readiness,
    problem_middleware,
    task_alive,
    with_ops_routes,
)

__all__ = ["FleetService", "installed_connection_kinds"]

log = structlog.get_logger("mowdeck.fleet")
GRANTS_CHANGED = "event.identity.grants.changed"


def installed_connection_kinds() -> frozenset[str]:
    """The connection kinds of the installed gateway adapters (entry points)."""
    try:
        return ConnectionRegistry.from_entry_points().kinds
    except Exception:
        # An adapter that fails to import is still declared; Fleet only stores the kind.
        from importlib.metadata import entry_points  # noqa: PLC0415

        log.warning("a connection adapter failed to load; using declared kinds", exc_info=True)
        return frozenset(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))


def _now() -> datetime:
    return datetime.now(UTC)


async def _keep_session(_: asyncpg.Connection) -> None:
    """Release a pooled connection without asyncpg's reset query (one round trip less).

    asyncpg still rolls back a transaction left open. Nothing on Fleet's own pool changes
    session state: no SET, LISTEN, WITH HOLD cursors or session advisory locks (the relay
    takes transaction-level locks; pruning unlocks or closes its connection).
    """


class FleetService:
    """Fleet: registry REST API, outbox relay, shard list replies, command issuing.

    Pass ``bus``, ``pool`` or ``authorizer`` to share them (the demo); what is not passed
    is created from the settings and closed again by ``stop()``.
    """

    name = "fleet"

    def __init__(
        self,
        settings: FleetSettings,
        *,
        auth_settings: AuthSettings | None = None,
        authz_settings: AuthzSettings | None = None,
        bus: Bus | None = None,
        pool: asyncpg.Pool | None = None,
        authorizer: Authorizer | None = None,
        verifier: TokenVerifier | None = None,
        connection_kinds: Collection[str] | None = None,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.settings = settings
        self._auth_settings = auth_settings
        self._authz_settings = authz_settings
        self._bus = bus
        self._pool = pool
        self._authorizer = authorizer
        self._verifier = verifier
        self._kinds = connection_kinds
        self.registry = registry if registry is not None else CollectorRegistry()
        self._gc_pauses = GcPauses(self.registry)
        self._clock = clock
        self.readiness = Readiness()
        self._owned: list[Callable[[], Any]] = []
        self._parts: list[Any] = []
        self._subs: list[Any] = []
        self._http: HttpServer | None = None
        self.fleet: Fleet | None = None
        self.pruner: Pruner | None = None

    @property
    def url(self) -> str:
        """The HTTP base URL (after ``start``)."""
        if self._http is None:
            raise RuntimeError("FleetService is not started")
        return self._http.url

    async def start(self) -> None:
        """Connect what was not passed in, start the background parts, then listen."""
        self._gc_pauses.install()
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        s = self.settings
        if self._bus is None:
            self._bus = await Bus.connect(s.nats_url, name="fleet", fast_path=s.nats_fast_path)
            self._owned.append(self._bus.drain)
        bus = self._bus
        await bus.ensure_streams()
        if self._pool is None:
            self._pool = await asyncpg.create_pool(
                s.database_url,
                min_size=1,
                max_size=s.fleet_db_pool_size,
                reset=_keep_session,
                # No idle-close timer armed on every release (the pool stays small anyway).
                max_inactive_connection_lifetime=0,
            )
            self._owned.append(self._pool.close)
        pool = self._pool
        if self._authorizer is None:
            authz = self._authz_settings or load_authz_settings()
            self._authorizer = build_authorizer(authz, pool)
            self._owned.append(self._authorizer.close)
        verifier = self._verifier or CachedTokenVerifier(
            self._auth_settings or load_auth_settings()
        )

        repository = PostgresMowerRepository(pool)
        command_log = PostgresCommandLog(pool)

        relay = OutboxRelay(
            repository,
            bus_publisher(bus),
            batch=s.fleet_outbox_batch,
            poll_seconds=s.fleet_outbox_poll_seconds,
            metrics=OutboxMetrics(self.registry),
        )
        waiters = ResultWaiters(bus)
        journal = CommandJournal(command_log, batch=s.fleet_recorder_batch)
        publisher = CommandPublisher(bus, clock=self._clock)
        recorder = ResultRecorder(
            bus,
            command_log,
            batch=s.fleet_recorder_batch,
            flush_seconds=s.fleet_recorder_flush_seconds,
        )
        responder = MowerListResponder(bus, repository, self.registry)
        self.pruner = pruner = Pruner(PostgresPruning(pool), s, self.registry, clock=self._clock)
        self.fleet = fleet = Fleet(
            settings=s,
            repository=repository,
            command_log=command_log,
            authorizer=CachedAuthorizer(self._authorizer, s.fleet_cache_seconds),
            records=RecordCache(repository, s.fleet_cache_seconds),
            relay=relay,
            journal=journal,
            publisher=publisher,
            waiters=waiters,
            connection_kinds=frozenset(
                self._kinds if self._kinds is not None else installed_connection_kinds()
            ),
            metrics=FleetMetrics(self.registry),
            clock=self._clock,
        )

        await waiters.start()
        self._parts.append(waiters)
        await recorder.start()
        self._parts.append(recorder)
        self._parts.append(journal)
        self._parts.append(publisher)
        relay.start()
        self._parts.append(relay)
        await responder.start()
        self._parts.append(responder)
        pruner.start()
        self._parts.append(pruner)
        self._subs.append(await bus.nc.subscribe(MOWER_EVENT_FILTER, cb=self._on_change))
        self._subs.append(await bus.nc.subscribe(GRANTS_CHANGED, cb=self._on_change))

        self._watch(relay, recorder)
        await self._serve(fleet, verifier)

    async def _serve(self, fleet: Fleet, verifier: TokenVerifier) -> None:
        app = web.Application(
            middlewares=[
                metrics_middleware(HttpMetrics(self.registry)),
                problem_middleware,
                auth_middleware(verifier),
                fleet_errors,
            ]
        )
        app[FLEET] = fleet
        with_ops_routes(app, self.readiness, self.registry)
        app.add_routes(routes())
        s = self.settings
        self._http = HttpServer(app, s.http_host, s.http_port)
        await self._http.start()
        self.readiness.set_ready()
        log.info("fleet listening", url=self._http.url)

    def _watch(self, relay: OutboxRelay, recorder: ResultRecorder) -> None:
        # What Fleet cannot work without: /healthz fails when one of them died.
        self.readiness.watch("outbox relay", task_alive(lambda: relay.task))
        self.readiness.watch("results consumer", lambda: recorder.alive)

    async def _on_change(self, _: Msg) -> None:
        # Another replica changed a mower or someone changed grants: drop cached answers.
        if self.fleet is not None:
            self.fleet.authorizer.invalidate()
            self.fleet.records.forget()

    async def stop(self) -> None:
        """Refuse traffic, finish requests, stop the parts, then close what Fleet owns."""
        self.readiness.set_not_ready("shutting down")
        self._gc_pauses.uninstall()
        if self._http is not None:
            await self._http.stop()
        for sub in self._subs:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
        self._subs.clear()
        for part in reversed(self._parts):
            try:
                await part.stop()
            except Exception:
                log.exception("stopping a part failed", part=type(part).__name__)
        self._parts.clear()
        for close in reversed(self._owned):
            try:
                await close()
            except Exception:
                log.exception("closing a resource failed")
        self._owned.clear()
