"""Composition: ``build(settings, base, ...)``, every part of a Realtime replica; no I/O,
nothing started (``service.py`` opens the base, builds, and starts the parts in
``steps``' order).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from datetime import timedelta

from aiohttp import web

from mowdeck.kit.compose import Base, Step
from mowdeck.kit.cors import CorsPolicy
from mowdeck.kit.http import task_alive
from mowdeck.kit.periodic import Periodic
from mowdeck.kit.seed import FleetSeed
from mowdeck.realtime.access import Access
from mowdeck.realtime.console import CodeExchange
from mowdeck.realtime.hub import Hub
from mowdeck.realtime.limits import realtime_limits
from mowdeck.realtime.metrics import RealtimeMetrics
from mowdeck.realtime.routes import RealtimeDeps, create_app
from mowdeck.realtime.session import Streams
from mowdeck.realtime.settings import RealtimeSettings
from mowdeck.realtime.stale import LatestStates
from mowdeck.realtime.tickets import Tickets

__all__ = ["Parts", "app", "build", "close_streams", "steps"]

# How long ``stop`` gives open streams to say goodbye before the listener goes.
_CLOSE_GRACE_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class Parts:
    """Every part of a Realtime replica."""

    base: Base
    metrics: RealtimeMetrics
    hub: Hub
    seed: FleetSeed
    access: Access
    heartbeats: Periodic
    streams: Streams
    tickets: Tickets


def build(
    settings: RealtimeSettings,
    base: Base,
    metrics: RealtimeMetrics,
    *,
    states: LatestStates,
    tickets: Tickets,
) -> Parts:
    """Every part, wired."""
    s, bus = settings, base.bus
    authorizer, _, denylist = base.require_api()
    hub = Hub(bus.js, metrics, denylist)
    # The accounts of every mower, from Fleet; the hub follows the mower events from its
    # start on, and the seed leaves alone the mowers they named meanwhile.
    seed = FleetSeed(
        bus,
        apply_list=hub.apply_fleet_list,
        request_timeout=s.realtime_seed_timeout_seconds,
        name="realtime-accounts-seed",
    )
    hub.on_mower_event = seed.saw
    access = Access(authorizer, hub, metrics, refresh=s.realtime_authz_refresh_seconds)
    heartbeats = Periodic("realtime-heartbeats", s.realtime_heartbeat_seconds, hub.heartbeat)
    streams = Streams(
        hub=hub,
        js=bus.js,
        states=states,
        metrics=metrics,
        replay_timeout=s.realtime_replay_timeout_seconds,
        stale_after=timedelta(seconds=s.realtime_stale_after_seconds),
    )
    return Parts(base, metrics, hub, seed, access, heartbeats, streams, tickets)


def steps(parts: Parts) -> list[Step]:
    """The order the parts start in (and stop in, reversed), with their ``/healthz`` names."""
    hub, seed, access, beats = parts.hub, parts.seed, parts.access, parts.heartbeats
    return [
        Step("live subscriptions", hub.start, hub.stop, lambda: hub.alive),
        Step("accounts seed", seed.start, seed.stop, lambda: seed.healthy),
        Step("authz refresh", access.start, access.stop, task_alive(lambda: access.task)),
        Step("heartbeats", beats.start, beats.stop, task_alive(lambda: beats.task)),
        # Every live subscription delivers before the port opens.
        Step("primed", hub.primed.wait),
    ]


def app(
    settings: RealtimeSettings, parts: Parts, console_codes: CodeExchange | None
) -> web.Application:
    """The streams, tickets and the console's page."""
    base = parts.base
    _, verifier, denylist = base.require_api()
    deps = RealtimeDeps(
        streams=parts.streams,
        access=parts.access,
        tickets=parts.tickets,
        verifier=verifier,
        settings=settings,
        cors=CorsPolicy(settings.http_cors_origins),
        denylist=denylist,
    )
    return create_app(
        deps,
        verifier,
        base.readiness,
        base.registry,
        limits=realtime_limits(settings, base.registry),
        exchange=console_codes,
    )


async def close_streams(hub: Hub) -> None:
    """Say goodbye to every open stream, for a grace time: before the listener stops, whose
    cleanup would otherwise wait for every stream."""
    for client in list(hub.clients):
        client.close("shutdown")
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(hub.drained(), _CLOSE_GRACE_SECONDS)
