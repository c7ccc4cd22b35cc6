"""The composition root of Notifications: ``NotificationsService(settings, ...)``.

``start()`` opens the base (given or owned, ``kit/compose.py``) and its ``Infra``, builds
the parts (``parts.build``), starts them in the order of ``steps`` and listens; ``stop()``
stops them in reverse.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import asyncpg
from aiohttp import web
from prometheus_client import CollectorRegistry

from mowdeck.authn import AuthSettings, TokenVerifier
from mowdeck.authz import Authorizer, AuthzSettings
from mowdeck.kit.bus import Bus
from mowdeck.kit.compose import Given, Needs, Step
from mowdeck.kit.http import task_alive
from mowdeck.kit.openapi import add_openapi
from mowdeck.kit.shell import ServiceShell
from mowdeck.notifications.alarms.audit_routes import audit_routes
from mowdeck.notifications.alarms.routes import ALARM_DEPS, AlarmDeps, alarm_routes
from mowdeck.notifications.delivery.limits import target_creations
from mowdeck.notifications.delivery.routes import TargetDeps, add_target_routes
from mowdeck.notifications.delivery.targets import TargetPolicy
from mowdeck.notifications.inbox.routes import ApiDeps, create_app, viewers_only
from mowdeck.notifications.infra import Infra, Stores
from mowdeck.notifications.metrics import NotificationsMetrics
from mowdeck.notifications.openapi import openapi
from mowdeck.notifications.parts import Parts, build
from mowdeck.notifications.pg import pool_options
from mowdeck.notifications.settings import NotificationsSettings

__all__ = ["NotificationsService", "steps"]


def _now() -> datetime:
    return datetime.now(UTC)


def steps(parts: Parts, *, seed: bool = True, fanout: bool = True) -> list[Step]:
    """The order the parts start in (and stop in, reversed), with their ``/readyz`` names;
    ``seed`` or ``fanout`` False leaves that part unstarted."""
    ingest, inbox, delivery = parts.ingest, parts.inbox, parts.delivery
    actors, batcher, scan = ingest.actors, ingest.batcher, ingest.scan
    links, identity, states, worker = ingest.links, inbox.identity, ingest.states, delivery.worker
    found = [
        Step("watch workers", actors.start, actors.stop, lambda: actors.dispatcher.workers_alive),
        # The fan-out publishes notifications.sent; the bus's publisher is started, not owned.
        Step("publisher", parts.infra.bus.publisher.start),
    ]
    if fanout:
        out = inbox.fanout
        found.append(Step("fan-out", out.start, out.stop, task_alive(lambda: out.task)))
    if seed:
        found.append(
            Step("fleet seed", inbox.seed.start, inbox.seed.stop, lambda: inbox.seed.healthy)
        )
        sites = ingest.sites  # the geofences' areas, before the first state is judged
        found.append(Step("site areas", sites.start, sites.stop, lambda: sites.healthy))
    return [
        *found,
        Step("state batcher", batcher.start, batcher.stop, task_alive(lambda: batcher.task)),
        Step("links consumer", links.start, links.stop, lambda: links.alive),
        Step("identity consumer", identity.start, identity.stop, lambda: identity.alive),
        Step("states consumer", states.start, states.stop, lambda: states.alive),
        Step("grants subscription", inbox.grants.start, inbox.grants.stop),
        Step("offline scan", scan.start, scan.stop, task_alive(lambda: scan.task)),
        Step("channels", delivery.channels.start, delivery.channels.stop),
        Step("delivery worker", worker.start, worker.stop, task_alive(lambda: worker.task)),
        Step("delivery pruning", delivery.pruning.start, delivery.pruning.stop),
        Step("alarm round", parts.alarms.start, parts.alarms.stop),
        Step("alarm announcer", lambda: None, parts.announcer.stop),
    ]


def _app(s: NotificationsSettings, parts: Parts) -> web.Application:
    """The HTTP API: preferences and the inbox, the targets behind the same 403."""
    infra, names, channels = parts.infra, parts.inbox.names, parts.delivery.channels
    stores = infra.stores
    access = parts.inbox.access
    api = ApiDeps(
        stores.inbox, stores.preferences, infra.authorizer, s, infra.clock, names.account, access
    )
    app = create_app(api, infra.verifier, infra.readiness, infra.registry, denylist=infra.denylist)
    targets = TargetDeps(
        stores.targets,
        TargetPolicy.from_settings(s),
        lambda: channels.application_server_key,
        creations=target_creations(s, infra.registry),
    )
    add_target_routes(app, targets, guard=viewers_only)
    app[ALARM_DEPS] = AlarmDeps(
        stores.alarms,
        infra.authorizer,
        names.account,
        infra.metrics,
        infra.clock,
        stores.alarm_feed,
        access,
    )
    app.add_routes(alarm_routes())
    app.add_routes(audit_routes())
    add_openapi(app, openapi())
    return app


class NotificationsService(ServiceShell[NotificationsSettings, Parts]):
    """Notifications: rules over states, the offline timer, the fan-out, the inbox API.

    Stateless: any number of replicas share the queue groups and the database. Pass
    ``bus``, ``pool``, ``stores``, ``authorizer`` or ``verifier`` to share them; what is not
    passed is created from the settings and closed again by ``stop()``. ``fanout=False``
    leaves pending events for another replica (tests use it to stop between the rules'
    commit and the fan-out); ``seed=False`` asks Fleet for no mower names.
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
        self._given = Given(bus, pool, authorizer, verifier, auth_settings, authz_settings)
        self._stores = stores
        self.metrics = NotificationsMetrics(self.metrics_registry)
        self._clock = clock
        self._seed, self._fanout, self._on_actors_started = seed, fanout, on_actors_started

    async def _start(self) -> None:
        s = self.settings
        options = pool_options(
            s.notifications_db_pool_size, statement_timeout_ms=s.database_statement_timeout_ms
        )
        needs = Needs("notifications", pool=options, pool_wanted=self._stores is None)
        base = await self._open(self._given, needs)
        stores = self._stores or Stores.postgres(
            base.require_pool(), maintenance_timeout_ms=s.database_maintenance_statement_timeout_ms
        )
        authorizer, verifier, denylist = base.require_api()
        infra = Infra(
            base.bus,
            stores,
            authorizer,
            verifier,
            denylist,
            self.metrics,
            base.registry,
            base.readiness,
            self._clock,
        )
        parts = build(s, infra, fanout=self._fanout, on_actors_started=self._on_actors_started)
        await self._start_parts(parts, steps(parts, seed=self._seed, fanout=self._fanout))
        await self._listen(_app(s, parts))
