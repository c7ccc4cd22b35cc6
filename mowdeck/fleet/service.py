"""The composition root of Fleet: ``FleetService(settings, ...)`` with ``start``/``stop``.

``start()`` opens the base (given or owned, ``kit/compose.py``), builds the parts
(``parts.build``), starts them in the order of ``parts.steps`` and listens; ``stop()``
stops them in reverse.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import asyncpg
from prometheus_client import CollectorRegistry

from mowdeck.authn import AuthSettings, TokenVerifier
from mowdeck.authz import Authorizer, AuthzSettings
from mowdeck.devices.kinds import ConnectionKinds
from mowdeck.fleet.caches import CachedTokenVerifier
from mowdeck.fleet.parts import Parts, app, build, steps
from mowdeck.fleet.postgres import pool_options
from mowdeck.fleet.settings import FleetSettings
from mowdeck.kit.bus import Bus
from mowdeck.kit.compose import Given, Needs
from mowdeck.kit.shell import ServiceShell

__all__ = ["FleetService"]


def _now() -> datetime:
    return datetime.now(UTC)


class FleetService(ServiceShell[FleetSettings, Parts]):
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
        self._given = Given(bus, pool, authorizer, verifier, auth_settings, authz_settings)
        self._kinds = connection_kinds
        self._clock = clock

    async def _start(self) -> None:
        s = self.settings
        options = pool_options(
            s.fleet_db_pool_size, statement_timeout_ms=s.database_statement_timeout_ms
        )
        needs = Needs("fleet", pool=options, verifier=CachedTokenVerifier)
        base = await self._open(self._given, needs)
        kinds = self._kinds or ConnectionKinds.from_entry_points()
        parts = build(s, base, kinds, clock=self._clock)
        await self._start_parts(parts, steps(parts))
        await self._listen(app(s, parts))
