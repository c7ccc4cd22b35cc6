"""Composition: ``build(settings, base, ...)``, every part of a Fleet replica; no I/O,
nothing started (``service.py`` opens the base, builds, and starts the parts in
``steps``' order).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from aiohttp import web

from mowdeck.authn import auth_middleware
from mowdeck.devices.endpoints import DeviceHosts
from mowdeck.devices.kinds import ConnectionKinds
from mowdeck.fleet.caches import CachedAuthorizer, CacheInvalidation, RecordCache
from mowdeck.fleet.endpoint_keys import assign_endpoint_keys
from mowdeck.fleet.events_relay import EventsRelay, EventsRelayMetrics, bus_publisher
from mowdeck.fleet.finalizing import Finalizer
from mowdeck.fleet.issuing import CommandJournal, CommandPublisher
from mowdeck.fleet.limits import COMMAND_LIMITS, CommandLimits, command_limits
from mowdeck.fleet.listing import MowerListResponder
from mowdeck.fleet.openapi import openapi
from mowdeck.fleet.postgres import PostgresMowerRepository, PostgresPruning
from mowdeck.fleet.postgres_commands import PostgresAuditTrail, PostgresCommandLog
from mowdeck.fleet.pruning import Pruner
from mowdeck.fleet.results import ResultRecorder, ResultWaiters
from mowdeck.fleet.routes import FLEET, fleet_errors, routes
from mowdeck.fleet.schedules.compose import ScheduleParts, build_schedules
from mowdeck.fleet.schedules.routes import SCHEDULES
from mowdeck.fleet.schedules.routes import routes as schedule_routes
from mowdeck.fleet.settings import FleetSettings
from mowdeck.fleet.sites.listing import SiteAreasResponder
from mowdeck.fleet.sites.postgres import PostgresSiteRepository
from mowdeck.fleet.sites.routes import SITES, site_routes
from mowdeck.fleet.sites.usecases import Sites
from mowdeck.fleet.usecases import Fleet, FleetMetrics
from mowdeck.kit.compose import Base, Step
from mowdeck.kit.cors import CorsPolicy
from mowdeck.kit.http import service_app, task_alive
from mowdeck.kit.openapi import add_openapi

__all__ = ["Parts", "app", "build", "steps"]


@dataclass(frozen=True, slots=True)
class Parts:
    """Every part of a Fleet replica."""

    base: Base
    fleet: Fleet
    relay: EventsRelay
    waiters: ResultWaiters
    journal: CommandJournal
    publisher: CommandPublisher
    recorder: ResultRecorder
    responder: MowerListResponder
    sites: Sites
    areas_responder: SiteAreasResponder
    pruner: Pruner
    finalizer: Finalizer
    limits: CommandLimits
    invalidation: CacheInvalidation
    schedules: ScheduleParts
    clock: Callable[[], datetime]


def build(
    settings: FleetSettings, base: Base, kinds: ConnectionKinds, *, clock: Callable[[], datetime]
) -> Parts:
    """Every part, wired."""
    s, bus, pool, registry = settings, base.bus, base.require_pool(), base.registry
    authorizer = base.require_api()[0]
    repository = PostgresMowerRepository(pool)
    site_repository = PostgresSiteRepository(pool)
    command_log = PostgresCommandLog(pool)
    relay = EventsRelay(
        repository,
        bus_publisher(bus),
        batch=s.fleet_events_relay_batch,
        poll_seconds=s.fleet_events_relay_poll_seconds,
        metrics=EventsRelayMetrics(registry),
    )
    waiters, publisher = ResultWaiters(bus), CommandPublisher(bus, clock=clock)
    journal = CommandJournal(command_log, batch=s.fleet_recorder_batch)
    fleet = Fleet(
        settings=s,
        repository=repository,
        sites=site_repository,
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
        metrics=FleetMetrics(registry),
        clock=clock,
    )
    maintenance = s.database_maintenance_statement_timeout_ms
    return Parts(
        *(base, fleet, relay, waiters, journal, publisher),
        recorder=ResultRecorder(
            bus,
            command_log,
            batch=s.fleet_recorder_batch,
            flush_seconds=s.fleet_recorder_flush_seconds,
        ),
        responder=MowerListResponder(bus, repository, registry),
        sites=Sites(site_repository, fleet.authorizer, fleet.records, relay, clock),
        areas_responder=SiteAreasResponder(bus, site_repository, registry),
        pruner=Pruner(
            PostgresPruning(pool, maintenance_timeout_ms=maintenance), s, registry, clock=clock
        ),
        finalizer=Finalizer(command_log, s, registry, clock=clock),
        limits=command_limits(s, pool, registry),
        invalidation=CacheInvalidation(
            bus, fleet.authorizer, fleet.records, fleet.metrics.caches_dropped.inc
        ),
        schedules=build_schedules(s, pool, fleet, publisher, registry, clock=clock),
        clock=clock,
    )


def steps(parts: Parts) -> list[Step]:
    """The order the parts start in (and stop in, reversed), with their ``/healthz`` names."""
    fleet, relay, recorder = parts.fleet, parts.relay, parts.recorder

    async def endpoint_keys() -> None:
        # Before the first fleet.mowers.list is answered: a mower an earlier registration
        # holds the endpoint of is not listed to the gateways.
        await assign_endpoint_keys(fleet.repository, fleet.endpoints, clock=parts.clock)

    return [
        Step("endpoint keys", endpoint_keys),
        Step("result waiters", parts.waiters.start, parts.waiters.stop),
        Step("results consumer", recorder.start, recorder.stop, lambda: recorder.alive),
        Step("command journal", _nothing, parts.journal.stop),
        Step("command publisher", _nothing, parts.publisher.stop),
        Step("events relay", relay.start, relay.stop, task_alive(lambda: relay.task)),
        Step("mower list responder", parts.responder.start, parts.responder.stop),
        Step("site areas responder", parts.areas_responder.start, parts.areas_responder.stop),
        Step("pruner", parts.pruner.start, parts.pruner.stop),
        Step("finalizer", parts.finalizer.start, parts.finalizer.stop),
        Step("cache invalidation", parts.invalidation.start, parts.invalidation.stop),
        Step("rate limit expiry", parts.limits.start, parts.limits.stop),
        Step(
            "scheduler",
            parts.schedules.scheduler.start,
            parts.schedules.scheduler.stop,
            task_alive(lambda: parts.schedules.scheduler.task),
        ),
    ]


def app(settings: FleetSettings, parts: Parts) -> web.Application:
    """The registry's REST API."""
    base = parts.base
    _, verifier, denylist = base.require_api()
    application = service_app(
        "fleet",
        base.readiness,
        base.registry,
        middlewares=[auth_middleware(verifier, denylist=denylist), fleet_errors],
        cors=CorsPolicy(settings.http_cors_origins),
    )
    application[FLEET] = parts.fleet
    application[COMMAND_LIMITS] = parts.limits
    application[SITES] = parts.sites
    application[SCHEDULES] = parts.schedules.api
    application.add_routes(routes())
    application.add_routes(site_routes())
    application.add_routes(schedule_routes())
    add_openapi(application, openapi())
    return application


def _nothing() -> None:
    return None
