"""The composition root of Fleet: ``FleetService(settings, ...)`` with ``start``/``stop``."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import asyncpg
from aiohttp import web
from nats.aio.msg import Msg
from prometheus_client import CollectorRegistry

from contracts.v1.subjects import MOWER_EVENT_FILTER
from mowdeck.authn import (
    AuthSettings,
    DenyList,
    TokenVerifier,
    auth_middleware,
    load_auth_settings,
    running_denylist,
)
from mowdeck.authz import Authorizer, AuthzSettings
from mowdeck.devices.endpoints import DeviceHosts
from mowdeck.devices.kinds import ConnectionKinds
from mowdeck.fleet.caches import CachedAuthorizer, CachedTokenVerifier, RecordCache
from mowdeck.fleet.endpoint_keys import assign_endpoint_keys
from mowdeck.fleet.events_relay import EventsRelay, EventsRelayMetrics, bus_publisher
from mowdeck.fleet.finalizing import Finalizer
from mowdeck.fleet.issuing import CommandJournal, CommandPublisher
from mowdeck.fleet.limits import COMMAND_LIMITS, CommandLimits, command_limits
from mowdeck.fleet.listing import MowerListResponder
from mowdeck.fleet.postgres import PostgresMowerRepository, PostgresPruning, pool_options
from mowdeck.fleet.postgres_commands import PostgresAuditTrail, PostgresCommandLog
from mowdeck.fleet.pruning import Pruner
from mowdeck.fleet.results import ResultRecorder, ResultWaiters
from mowdeck.fleet.routes import FLEET, fleet_errors, routes
from mowdeck.fleet.settings import FleetSettings
from mowdeck.fleet.usecases import Fleet, FleetMetrics
from mowdeck.kit.bus import Bus
from mowdeck.kit.cors import CorsPolicy
from mowdeck.kit.garbage_collector import GcPauses
from mowdeck.kit.http import problem_middleware, request_metrics, task_alive, with_ops_routes
from mowdeck.kit.shell import ServiceShell

__all__ = ["FleetService"]

GRANTS_CHANGED = "event.identity.grants.changed"


def _now() -> datetime:
    return datetime.now(UTC)


class FleetService(ServiceShell[FleetSettings]):
    """Fleet: registry REST API, events relay, shard list replies, command issuing.

    Pass ``bus``, ``pool`` or ``authorizer`` to share them (the demo); what is not passed
    is created from the settings and closed again by ``stop()``.
    """

    name = "fleet"
    stopping_reason = "shutting down"

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
        connection_kinds: ConnectionKinds | None = None,
        metrics_registry: CollectorRegistry | None = None,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        super().__init__(settings, metrics_registry)
        self._auth_settings = auth_settings
        self._authz_settings = authz_settings
        self._bus = bus
        self._pool = pool
        self._authorizer = authorizer
        self._verifier = verifier
        self._kinds = connection_kinds
        self._gc_pauses = GcPauses(self.metrics_registry)
        self._clock = clock
        self.fleet: Fleet | None = None
        self.pruner: Pruner | None = None
        self.finalizer: Finalizer | None = None

    async def _start(self) -> None:
        # Connect what was not passed in, start the background parts, then listen.
        s, res = self.settings, self._resources
        self._gc_pauses.install()
        res.push_sync(self._gc_pauses.uninstall, name="gc pauses")
        bus = await res.bus_for(
            self._bus, s, user="fleet", readiness=self.readiness, registry=self.metrics_registry
        )
        options = pool_options(
            s.fleet_db_pool_size, statement_timeout_ms=s.database_statement_timeout_ms
        )
        pool = await res.pool(self._pool, s.database_url, **options)
        authorizer = res.authorizer(self._authorizer, self._authz_settings, pool)
        auth = self._auth_settings or load_auth_settings()
        verifier = self._verifier or CachedTokenVerifier(auth)
        denylist = await res.enter(running_denylist(bus, auth))

        kinds = self._kinds or ConnectionKinds.from_entry_points()
        repository = PostgresMowerRepository(pool)
        command_log = PostgresCommandLog(pool)
        relay = EventsRelay(
            repository,
            bus_publisher(bus),
            batch=s.fleet_events_relay_batch,
            poll_seconds=s.fleet_events_relay_poll_seconds,
            metrics=EventsRelayMetrics(self.metrics_registry),
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
        responder = MowerListResponder(bus, repository, self.metrics_registry)
        self.pruner = pruner = Pruner(
            PostgresPruning(
                pool, maintenance_timeout_ms=s.database_maintenance_statement_timeout_ms
            ),
            s,
            self.metrics_registry,
            clock=self._clock,
        )
        self.finalizer = finalizer = Finalizer(
            command_log, s, self.metrics_registry, clock=self._clock
        )
        self.fleet = fleet = Fleet(
            settings=s,
            repository=repository,
            command_log=command_log,
            audit_trail=PostgresAuditTrail(pool),
            authorizer=CachedAuthorizer(authorizer, s.fleet_cache_seconds),
            records=RecordCache(repository, s.fleet_cache_seconds),
            relay=relay,
            journal=journal,
            publisher=publisher,
            waiters=waiters,
            connection_kinds=kinds.names,
            endpoints=kinds.policy(DeviceHosts(s.gateway_device_hosts)),
            metrics=FleetMetrics(self.metrics_registry),
            clock=self._clock,
        )

        # Before the first fleet.mowers.list is answered: a mower an earlier registration
        # holds the endpoint of is not listed to the gateways.
        await assign_endpoint_keys(repository, fleet.endpoints, clock=self._clock)
        await waiters.start()
        res.push(waiters.stop, name="result waiters")
        await recorder.start()
        res.push(recorder.stop, name="result recorder")
        res.push(journal.stop, name="command journal")
        res.push(publisher.stop, name="command publisher")
        relay.start()
        res.push(relay.stop, name="events relay")
        await responder.start()
        res.push(responder.stop, name="mower list responder")
        pruner.start()
        res.push(pruner.stop, name="pruner")
        finalizer.start()
        res.push(finalizer.stop, name="finalizer")
        for subject in (MOWER_EVENT_FILTER, GRANTS_CHANGED):
            sub = await bus.nc.subscribe(subject, cb=self._on_change)
            res.push(_quietly(sub.unsubscribe), name=f"subscription {subject}")

        limits = command_limits(s, pool, self.metrics_registry)
        limits.start()
        res.push(limits.stop, name="rate limit expiry")

        self._watch(relay, recorder)
        await self._listen(self._app(fleet, verifier, denylist, limits))

    def _app(
        self, fleet: Fleet, verifier: TokenVerifier, denylist: DenyList, limits: CommandLimits
    ) -> web.Application:
        app = web.Application(
            middlewares=[
                request_metrics(self.metrics_registry, service="fleet"),
                problem_middleware,
                auth_middleware(verifier, denylist=denylist),
                fleet_errors,
            ]
        )
        CorsPolicy(self.settings.http_cors_origins).install(app)
        app[FLEET] = fleet
        app[COMMAND_LIMITS] = limits
        with_ops_routes(app, self.readiness, self.metrics_registry)
        app.add_routes(routes())
        return app

    def _watch(self, relay: EventsRelay, recorder: ResultRecorder) -> None:
        # What Fleet cannot work without: /healthz fails when one of them died.
        self.readiness.watch("events relay", task_alive(lambda: relay.task))
        self.readiness.watch("results consumer", lambda: recorder.alive)

    async def _on_change(self, _: Msg) -> None:
        # Another replica changed a mower or someone changed grants: drop cached answers.
        if self.fleet is not None:
            self.fleet.authorizer.invalidate()
            self.fleet.records.forget()
            self.fleet.metrics.caches_dropped.inc()


def _quietly(close: Callable[[], Awaitable[object]]) -> Callable[[], Awaitable[None]]:
    # Unsubscribing from a connection that is already gone has nothing left to undo.
    async def closing() -> None:
        with contextlib.suppress(Exception):
            await close()

    return closing
