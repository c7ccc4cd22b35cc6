"""The composition root of Notifications: ``NotificationsService(settings, ...)``.

``start()`` opens the ``Infra`` (given or owned), builds the parts (``parts.build``),
starts them in the order of ``steps`` and listens; ``stop()`` stops them in reverse.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg
from aiohttp import web
from prometheus_client import CollectorRegistry

from mowdeck.authn import AuthSettings, TokenVerifier, load_auth_settings, running_denylist
from mowdeck.authz import Authorizer, AuthzSettings
from mowdeck.kit.bus import Bus
from mowdeck.kit.garbage_collector import GcPauses
from mowdeck.kit.http import task_alive
from mowdeck.kit.shell import ServiceShell
from mowdeck.notifications.delivery.limits import target_creations
from mowdeck.notifications.delivery.routes import TargetDeps, add_target_routes
from mowdeck.notifications.delivery.targets import TargetPolicy
from mowdeck.notifications.inbox.routes import ApiDeps, create_app, viewers_only
from mowdeck.notifications.infra import Infra, Stores
from mowdeck.notifications.metrics import NotificationsMetrics
from mowdeck.notifications.parts import Parts, build
from mowdeck.notifications.pg import pool_options
from mowdeck.notifications.settings import NotificationsSettings

__all__ = ["NotificationsService", "Step", "steps"]


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Step:
    """A part to start: ``start`` (a coroutine is awaited), ``stop``, whether it is alive."""

    name: str
    start: Callable[[], object]
    stop: Callable[[], Awaitable[object]] | None = None
    alive: Callable[[], bool] | None = None


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
    ]


def _app(s: NotificationsSettings, parts: Parts) -> web.Application:
    """The HTTP API: preferences and the inbox, the targets behind the same 403."""
    infra, names, channels = parts.infra, parts.inbox.names, parts.delivery.channels
    stores = infra.stores
    api = ApiDeps(stores.inbox, stores.preferences, infra.authorizer, s, infra.clock, names.account)
    app = create_app(api, infra.verifier, infra.readiness, infra.registry, denylist=infra.denylist)
    targets = TargetDeps(
        stores.targets,
        TargetPolicy.from_settings(s),
        lambda: channels.application_server_key,
        creations=target_creations(s, infra.registry),
    )
    add_target_routes(app, targets, guard=viewers_only)
    return app


class NotificationsService(ServiceShell[NotificationsSettings]):
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
        self._auth_settings = auth_settings
        self._authz_settings = authz_settings
        self._bus = bus
        self._pool = pool
        self._stores = stores
        self._authorizer = authorizer
        self._verifier = verifier
        self.gc_pauses = GcPauses(self.metrics_registry)
        self.metrics = NotificationsMetrics(self.metrics_registry)
        self._clock = clock
        self._seed, self._fanout, self._on_actors_started = seed, fanout, on_actors_started
        self._parts: Parts | None = None

    @property
    def parts(self) -> Parts:
        """The parts this replica runs (after ``start``)."""
        if self._parts is None:
            raise RuntimeError("NotificationsService is not started")
        return self._parts

    async def _start(self) -> None:
        infra = await self._open()
        self._parts = parts = build(
            self.settings, infra, fanout=self._fanout, on_actors_started=self._on_actors_started
        )
        for step in steps(parts, seed=self._seed, fanout=self._fanout):
            started = step.start()
            if inspect.isawaitable(started):
                await started
            if step.stop is not None:
                self._resources.push(step.stop, name=step.name)
            if step.alive is not None:
                self.readiness.watch(step.name, step.alive)
        await self._listen(_app(self.settings, parts))

    async def _open(self) -> Infra:
        """What the parts run on: given, or connected now and closed by ``stop()``."""
        s, res = self.settings, self._resources
        self.gc_pauses.install()
        res.push_sync(self.gc_pauses.uninstall, name="gc pauses")
        readiness, registry = self.readiness, self.metrics_registry
        bus = await res.bus_for(
            self._bus, s, user="notifications", readiness=readiness, registry=registry
        )
        pool, stores = self._pool, self._stores
        if pool is None and (stores is None or self._authorizer is None):
            options = pool_options(
                s.notifications_db_pool_size, statement_timeout_ms=s.database_statement_timeout_ms
            )
            pool = await res.pool(None, s.database_url, **options)
        if stores is None:
            assert pool is not None  # made just above when no stores were given
            timeout = s.database_maintenance_statement_timeout_ms
            stores = Stores.postgres(pool, maintenance_timeout_ms=timeout)
        authorizer = res.authorizer(self._authorizer, self._authz_settings, pool)
        auth = self._auth_settings or load_auth_settings()
        # Disabled and deleted users are refused from the moment any service saw the event.
        denylist = await res.enter(running_denylist(bus, auth))
        verifier = self._verifier or TokenVerifier(auth)
        metrics, clock = self.metrics, self._clock
        return Infra(
            bus, stores, authorizer, verifier, denylist, metrics, registry, readiness, clock
        )
