"""Composition, as every service does it: open what the parts run on, build, start in order.

A service's start has three moves, each its own function (cosmicpython's bootstrap):

1. ``open_base``: the prologue every service shares. The bus (as the service's bus user,
   waiting for its streams), the database pool, the authorizer, the token verifier and
   the running deny-list: each taken from ``Given`` when the caller passes it (the demo
   and tests share them), otherwise opened now and closed again at stop.
2. ``build(settings, base, ...) -> Parts``: the service's own, pure function. It
   constructs every part and wires them to each other; nothing is started, nothing is
   awaited, and a frozen dataclass of the parts is what comes out.
3. ``steps(parts) -> list[Step]``: the order the parts start in; ``start_steps`` starts
   them, pushes each stop (run in reverse at stop) and watches each liveness on
   ``/healthz``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import asyncpg
from prometheus_client import CollectorRegistry

from mowdeck.authn import (
    AuthSettings,
    DenyList,
    TokenVerifier,
    load_auth_settings,
    running_denylist,
)
from mowdeck.authz import Authorizer, AuthzSettings, load_authz_settings
from mowdeck.kit.bus import Bus
from mowdeck.kit.http import Readiness
from mowdeck.kit.lifecycle import Resources
from mowdeck.kit.settings import BaseSettings

__all__ = ["Base", "Given", "Needs", "Step", "open_base", "start_steps"]


@dataclass(frozen=True, slots=True)
class Step:
    """A part to start: ``start`` (a coroutine it returns is awaited), the ``stop`` run in
    reverse order at stop (None: the service's own ``stop`` ends it), and whether it is
    alive (watched on ``/healthz`` under ``name``)."""

    name: str
    start: Callable[[], object]
    stop: Callable[[], Awaitable[object]] | None = None
    alive: Callable[[], bool] | None = None


@dataclass(frozen=True, slots=True)
class Given:
    """What the caller passes to share or replace; None is opened from the settings."""

    bus: Bus | None = None
    pool: asyncpg.Pool | None = None
    authorizer: Authorizer | None = None
    verifier: TokenVerifier | None = None
    auth_settings: AuthSettings | None = None
    authz_settings: AuthzSettings | None = None


@dataclass(frozen=True, slots=True)
class Needs:
    """What a service's parts run on.

    ``user`` is its bus user (``kit/bus_permissions.py``) and ``name`` its connection's
    (``user`` when None). ``pool`` are the options of its pool (``asyncpg.create_pool``'s
    keywords; None: no pool of its own), opened only when ``pool_wanted`` says a part
    still needs it once the given parts are known. ``authz`` asks for an authorizer and
    ``verifier`` for the token verifier class to build (None: no API, no deny-list).
    """

    user: str
    name: str | None = None
    pool: dict[str, Any] | None = None
    pool_wanted: bool = True
    authz: bool = True
    verifier: type[TokenVerifier] | None = TokenVerifier


@dataclass(frozen=True, slots=True)
class Base:
    """What every service's parts run on, given or opened (``open_base``)."""

    bus: Bus
    pool: asyncpg.Pool | None
    authorizer: Authorizer | None
    verifier: TokenVerifier | None
    denylist: DenyList | None
    registry: CollectorRegistry
    readiness: Readiness

    def require_pool(self) -> asyncpg.Pool:
        """The pool; a service whose ``Needs`` asked for none has a programming error."""
        if self.pool is None:
            raise RuntimeError("no database pool was opened: the service's Needs asked none")
        return self.pool

    def require_api(self) -> tuple[Authorizer, TokenVerifier, DenyList]:
        """The authorizer, verifier and deny-list an HTTP API with bearer tokens needs."""
        if self.authorizer is None or self.verifier is None or self.denylist is None:
            raise RuntimeError("the service's Needs asked for no authorizer or verifier")
        return self.authorizer, self.verifier, self.denylist


async def open_base(
    resources: Resources,
    settings: BaseSettings,
    given: Given,
    needs: Needs,
    *,
    readiness: Readiness,
    registry: CollectorRegistry,
) -> Base:
    """The prologue of every service's start: the bus, pool, authorizer, verifier and
    deny-list, each ``given`` or opened now (and pushed onto ``resources`` to close)."""
    bus = await resources.bus_for(
        given.bus,
        settings,
        user=needs.user,
        name=needs.name,
        readiness=readiness,
        registry=registry,
    )
    authz = (given.authz_settings or load_authz_settings()) if needs.authz else None
    pool = given.pool
    # A local authorizer keeps its tuples in PostgreSQL: it needs the pool too.
    wanted = needs.pool_wanted or (
        authz is not None and given.authorizer is None and authz.authz == "local"
    )
    if pool is None and needs.pool is not None and wanted:
        pool = await resources.pool(None, settings.database_url, **needs.pool)
    authorizer = None
    if authz is not None:
        authorizer = resources.authorizer(given.authorizer, authz, pool)
    verifier, denylist = None, None
    if needs.verifier is not None:
        auth = given.auth_settings or load_auth_settings()
        verifier = given.verifier or needs.verifier(auth)
        # Loaded before the port opens: a user denied before this replica started is
        # refused from its first request.
        denylist = await resources.enter(running_denylist(bus, auth))
    return Base(bus, pool, authorizer, verifier, denylist, registry, readiness)


async def start_steps(
    resources: Resources, readiness: Readiness, steps: Iterable[Step], started: set[str]
) -> None:
    """Start ``steps`` in order: each one's stop is pushed (run in reverse at close), its
    liveness watched and its name added to ``started``, so that a start failing half-way
    stops exactly what started (a service's own ``stop`` asks ``started`` for the rest)."""
    for step in steps:
        begun = step.start()
        if inspect.isawaitable(begun):
            await begun
        started.add(step.name)
        if step.stop is not None:
            resources.push(step.stop, name=step.name)
        if step.alive is not None:
            readiness.watch(step.name, step.alive)
