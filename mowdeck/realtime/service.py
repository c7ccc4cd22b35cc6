"""The composition root of Realtime: ``RealtimeService(settings, ...)``, ``start``, ``stop``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import asyncpg
from prometheus_client import CollectorRegistry

from mowdeck.authn import (
    AuthSettings,
    JetStreamDenyList,
    TokenVerifier,
    load_auth_settings,
    running_denylist,
)
from mowdeck.authz import Authorizer, AuthzSettings, load_authz_settings
from mowdeck.kit.bus import Bus
from mowdeck.kit.cors import CorsPolicy
from mowdeck.kit.garbage_collector import GcPauses
from mowdeck.kit.http import task_alive
from mowdeck.kit.periodic import Periodic
from mowdeck.kit.pg import session_settings
from mowdeck.kit.seed import FleetSeed
from mowdeck.kit.shell import ServiceShell
from mowdeck.realtime.access import Access
from mowdeck.realtime.console import CodeExchange
from mowdeck.realtime.hub import Hub
from mowdeck.realtime.limits import realtime_limits
from mowdeck.realtime.metrics import RealtimeMetrics
from mowdeck.realtime.routes import RealtimeDeps, create_app
from mowdeck.realtime.session import Streams
from mowdeck.realtime.settings import RealtimeSettings
from mowdeck.realtime.stale import LatestStates, NoLatestStates, PostgresLatestStates
from mowdeck.realtime.tickets import NatsTickets, Tickets, open_bucket

__all__ = ["RealtimeService"]


# How long ``stop`` gives open streams to say goodbye before the listener goes.
_CLOSE_GRACE_SECONDS = 2.0


class RealtimeService(ServiceShell[RealtimeSettings]):
    """Realtime: live mower events to browsers and tools over SSE and WebSocket.

    Stateless: nothing durable of its own, any number of replicas. Pass ``bus``, ``pool``,
    ``authorizer``, ``verifier``, ``states`` or ``tickets`` to share or replace them; what
    is not passed is created from the settings and closed again by ``stop()``.
    """

    name = "realtime"

    def __init__(
        self,
        settings: RealtimeSettings,
        *,
        auth_settings: AuthSettings | None = None,
        authz_settings: AuthzSettings | None = None,
        bus: Bus | None = None,
        pool: asyncpg.Pool | None = None,
        authorizer: Authorizer | None = None,
        verifier: TokenVerifier | None = None,
        states: LatestStates | None = None,
        tickets: Tickets | None = None,
        metrics_registry: CollectorRegistry | None = None,
        console_codes: CodeExchange | None = None,
        on_started: Callable[[], object] | None = None,
    ) -> None:
        """``on_started()`` runs once the service listens (the process's command uses it
        to freeze what lives after start-up). With ``console_codes`` the console's page
        exchanges one-time codes from sign-in links for tokens (the demo's); without, it
        asks for a token to paste."""
        super().__init__(settings, metrics_registry)
        self._console_codes = console_codes
        self._on_started = on_started
        self._auth_settings = auth_settings
        self._authz_settings = authz_settings
        self._bus = bus
        self._pool = pool
        self._authorizer = authorizer
        self._verifier = verifier
        self._states = states
        self._tickets = tickets
        self.metrics = RealtimeMetrics(self.metrics_registry)
        self.gc_pauses = GcPauses(self.metrics_registry)
        self.hub: Hub | None = None
        self.access: Access | None = None
        self.denylist: JetStreamDenyList | None = None
        self.fleet_seed: FleetSeed | None = None

    async def _start(self) -> None:
        # Connect, subscribe to the three streams, read the latest states, then listen.
        s, res = self.settings, self._resources
        self.gc_pauses.install()
        res.push_sync(self.gc_pauses.uninstall, name="gc pauses")
        bus = await res.bus_for(
            self._bus, s, user="realtime", readiness=self.readiness, registry=self.metrics_registry
        )
        authorizer = self._authorizer
        if authorizer is None:
            authz = self._authz_settings or load_authz_settings()
            pool = None
            if authz.authz == "local":
                pool = await res.pool(self._pool, s.database_url, **self._pool_options())
            authorizer = res.authorizer(None, authz, pool)
        auth = self._auth_settings or load_auth_settings()
        verifier = self._verifier or TokenVerifier(auth)
        # Loaded before the port opens: a user denied before this replica started is
        # refused from its first request.
        self.denylist = denylist = await res.enter(running_denylist(bus, auth))
        tickets = self._tickets
        if tickets is None:
            ttl = s.realtime_ticket_ttl_seconds
            tickets = NatsTickets(await open_bucket(bus.js, s.realtime_ticket_bucket, ttl), ttl)
        states = self._states or await self._telemetry_states()

        self.hub = hub = Hub(bus.js, self.metrics, denylist)
        # The accounts of every mower, from Fleet; the hub follows the mower events from
        # its start on, and the seed leaves alone the mowers they named meanwhile.
        self.fleet_seed = seed = FleetSeed(
            bus,
            apply_list=hub.apply_fleet_list,
            request_timeout=s.realtime_seed_timeout_seconds,
            name="realtime-accounts-seed",
        )
        hub.on_mower_event = seed.saw
        await hub.start()
        res.push(hub.stop, name="hub")
        await seed.start()
        res.push(seed.stop, name="accounts seed")
        self.access = access = Access(
            authorizer, hub, self.metrics, refresh=s.realtime_authz_refresh_seconds
        )
        access.start()
        res.push(access.stop, name="authz refresh")
        heartbeats = Periodic("realtime-heartbeats", s.realtime_heartbeat_seconds, hub.heartbeat)
        heartbeats.start()
        res.push(heartbeats.stop, name="heartbeats")
        await hub.primed.wait()

        watch = self.readiness.watch
        watch("live subscriptions", lambda: hub.alive)
        watch("authz refresh", task_alive(lambda: access.task))
        watch("heartbeats", task_alive(lambda: heartbeats.task))
        watch("accounts seed", lambda: seed.healthy)
        streams = Streams(
            hub=hub,
            js=bus.js,
            states=states,
            metrics=self.metrics,
            replay_timeout=s.realtime_replay_timeout_seconds,
            stale_after=timedelta(seconds=s.realtime_stale_after_seconds),
        )
        deps = RealtimeDeps(
            streams=streams,
            access=access,
            tickets=tickets,
            verifier=verifier,
            settings=s,
            cors=CorsPolicy(s.http_cors_origins),
            denylist=denylist,
        )
        app = create_app(
            deps,
            verifier,
            self.readiness,
            self.metrics_registry,
            limits=realtime_limits(s, self.metrics_registry),
            exchange=self._console_codes,
        )
        await self._listen(app)
        # Pushed after the listener, so run before its stop.
        res.push(self._close_streams, name="open streams")
        if self._on_started is not None:
            self._on_started()

    def _pool_options(self) -> dict[str, Any]:
        # Realtime reads tuples (the local authorizer) and Telemetry's latest rows.
        timeout = self.settings.database_statement_timeout_ms
        return {"min_size": 1, "max_size": 4, "server_settings": session_settings(timeout)}

    async def _telemetry_states(self) -> LatestStates:
        s, res = self.settings, self._resources
        if s.realtime_telemetry_database:
            pool = await res.pool(self._pool, s.database_url, **self._pool_options())
            return PostgresLatestStates(pool)
        return NoLatestStates()

    async def _close_streams(self) -> None:
        # Before the listener stops: its cleanup would otherwise wait for every stream.
        hub = self.hub
        if hub is None:
            return
        for client in list(hub.clients):
            client.close("shutdown")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(hub.drained(), _CLOSE_GRACE_SECONDS)
