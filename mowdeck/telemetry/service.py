"""The composition root of Telemetry: ``TelemetryService(settings, ...)``, ``start``, ``stop``.

``start()`` opens the base (given or owned), builds the parts (``parts.build``), starts
them in the order of ``parts.steps`` and listens; ``stop()`` stops them in reverse.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import asyncpg
from prometheus_client import CollectorRegistry

from mowdeck.authn import AuthSettings, TokenVerifier
from mowdeck.authz import Authorizer, AuthzSettings
from mowdeck.kit.bus import Bus
from mowdeck.kit.compose import Given, Needs
from mowdeck.kit.shell import ServiceShell
from mowdeck.telemetry.metrics import TelemetryMetrics
from mowdeck.telemetry.parts import Parts, app, build, steps
from mowdeck.telemetry.ports import TelemetryStore
from mowdeck.telemetry.postgres import PostgresTelemetryStore, pool_options
from mowdeck.telemetry.settings import TelemetrySettings

__all__ = ["TelemetryService"]


def _now() -> datetime:
    return datetime.now(UTC)


class TelemetryService(ServiceShell[TelemetrySettings, Parts]):
    """Telemetry: state ingest, command timeline, mower directory, retention and queries.

    Stateless: any number of replicas share the queue groups and the database. Pass
    ``bus``, ``pool``, ``authorizer``, ``verifier`` or ``store`` to share them; what is not
    passed is created from the settings and closed again by ``stop()``. ``seed=False``
    asks Fleet for no directory, ``retention=False`` leaves retention to the test.
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
        self._given = Given(bus, pool, authorizer, verifier, auth_settings, authz_settings)
        self._store = store
        self.metrics = TelemetryMetrics(self.metrics_registry)
        self._clock = clock
        self._seed, self._retention = seed, retention
        self._on_actors_started = on_actors_started

    async def _start(self) -> None:
        s = self.settings
        options = pool_options(
            s.telemetry_db_pool_size, statement_timeout_ms=s.database_statement_timeout_ms
        )
        base = await self._open(
            self._given, Needs("telemetry", pool=options, pool_wanted=self._store is None)
        )
        store = self._store or PostgresTelemetryStore(
            base.require_pool(),
            s.database_url,
            maintenance_timeout_ms=s.database_maintenance_statement_timeout_ms,
        )
        parts = build(
            s,
            base,
            store,
            self.metrics,
            clock=self._clock,
            on_actors_started=self._on_actors_started,
        )
        await self._start_parts(parts, steps(parts, seed=self._seed, retention=self._retention))
        await self._listen(app(s, parts))
