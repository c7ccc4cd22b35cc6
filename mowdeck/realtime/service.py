"""The composition root of Realtime: ``RealtimeService(settings, ...)``, ``start``, ``stop``.

``start()`` opens the base (given or owned, ``kit/compose.py``) and the ticket bucket,
builds the parts (``parts.build``), starts them in the order of ``parts.steps`` and
listens; ``stop()`` says goodbye to the open streams and stops the rest in reverse.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import asyncpg
from prometheus_client import CollectorRegistry

from mowdeck.authn import AuthSettings, TokenVerifier
from mowdeck.authz import Authorizer, AuthzSettings
from mowdeck.kit.bus import Bus
from mowdeck.kit.compose import Base, Given, Needs
from mowdeck.kit.pg import session_settings
from mowdeck.kit.shell import ServiceShell
from mowdeck.realtime.console import CodeExchange
from mowdeck.realtime.metrics import RealtimeMetrics
from mowdeck.realtime.parts import Parts, app, build, close_streams, steps
from mowdeck.realtime.settings import RealtimeSettings
from mowdeck.realtime.stale import LatestStates, NoLatestStates, PostgresLatestStates
from mowdeck.realtime.tickets import NatsTickets, Tickets, open_bucket

__all__ = ["RealtimeService"]


class RealtimeService(ServiceShell[RealtimeSettings, Parts]):
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
        self._given = Given(bus, pool, authorizer, verifier, auth_settings, authz_settings)
        self._states = states
        self._tickets = tickets
        self.metrics = RealtimeMetrics(self.metrics_registry)

    async def _start(self) -> None:
        s = self.settings
        # Realtime reads tuples (the local authorizer) and Telemetry's latest rows.
        wanted = self._states is None and s.realtime_telemetry_database
        base = await self._open(
            self._given, Needs("realtime", pool=self._pool_options(), pool_wanted=wanted)
        )
        tickets = self._tickets
        if tickets is None:
            ttl = s.realtime_ticket_ttl_seconds
            tickets = NatsTickets(
                await open_bucket(base.bus.js, s.realtime_ticket_bucket, ttl), ttl
            )
        parts = build(
            s, base, self.metrics, states=self._states or _latest_states(s, base), tickets=tickets
        )
        await self._start_parts(parts, steps(parts))
        await self._listen(app(s, parts, self._console_codes))
        # Pushed after the listener, so run before its stop.
        self._resources.push(partial(close_streams, parts.hub), name="open streams")
        if self._on_started is not None:
            self._on_started()

    def _pool_options(self) -> dict[str, Any]:
        timeout = self.settings.database_statement_timeout_ms
        return {"min_size": 1, "max_size": 4, "server_settings": session_settings(timeout)}


def _latest_states(settings: RealtimeSettings, base: Base) -> LatestStates:
    if settings.realtime_telemetry_database:
        return PostgresLatestStates(base.require_pool())
    return NoLatestStates()
