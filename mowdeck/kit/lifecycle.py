"""Ordered start and graceful, ordered shutdown on SIGTERM or SIGINT.

``Resources`` is what a service runs on (a bus, a pool, an HTTP listener, every started
part): each is pushed as it is started and released in reverse order at ``close()``, so
``stop()`` of a service whose start failed half-way releases exactly what was started.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import Any, Protocol, TypeVar

import asyncpg
import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry

from mowdeck.authz import Authorizer, AuthzSettings, build_authorizer, load_authz_settings
from mowdeck.kit.background import cancel_and_wait
from mowdeck.kit.bus import Bus, NatsCredentials
from mowdeck.kit.bus_permissions import user as bus_user
from mowdeck.kit.dependency_metrics import DependencyMetrics
from mowdeck.kit.http import Readiness, with_ops_routes
from mowdeck.kit.http_server import HttpServer
from mowdeck.kit.logging import bound
from mowdeck.kit.settings import BaseSettings

__all__ = ["Resources", "Service", "run_services", "start_all", "stop_all"]

log = structlog.get_logger("mowdeck.lifecycle")

# How long one part of a service's resources may take to close before the rest go on.
PART_TIMEOUT_SECONDS = 30.0
# A bus's drain bounds its own steps (5 s + 5 s + nats-py's 30 s drain): a little more.
BUS_DRAIN_TIMEOUT_SECONDS = 45.0
T = TypeVar("T")


class Service(Protocol):
    """Something with an ordered start and a graceful stop.

    A start that fails or is cancelled is followed by ``stop()`` (``start_all`` does it),
    which releases what the start got to.
    """

    name: str

    async def start(self) -> None:
        """Start; return when ready to serve."""

    async def stop(self) -> None:
        """Stop gracefully; return when nothing accepted is left undone."""


class Resources:
    """What a service owns or borrows, released in reverse order by ``close()``.

    Borrowed things (a bus or pool passed in, as the demo shares them) are returned as
    they are and never closed; what is created here is closed here.
    """

    def __init__(self, *, part_timeout: float = PART_TIMEOUT_SECONDS) -> None:
        self._stack = AsyncExitStack()
        self._part_timeout = part_timeout
        self._dependencies: DependencyMetrics | None = None

    async def bus(
        self,
        given: Bus | None,
        url: str,
        *,
        name: str,
        fast_path: bool = True,
        credentials: NatsCredentials | None = None,
        user: str | None = None,
    ) -> Bus:
        """``given``, or a bus connected to ``url`` and drained at close.

        ``fast_path`` is the service's ``nats_fast_path`` (``MOWDECK_NATS_FAST_PATH``);
        ``credentials`` its own NATS user (``NatsCredentials.from_settings``) and ``user``
        which user of ``kit/bus_permissions.py`` that is (its inbox prefix).
        """
        if given is not None:
            return given
        bus = await Bus.connect(
            url, name=name, fast_path=fast_path, credentials=credentials, user=user
        )
        # Its own steps are bounded (acks 5 s, async publishes 5 s, nats-py's drain 30 s).
        self.push(bus.drain, name=f"bus {name}", timeout=BUS_DRAIN_TIMEOUT_SECONDS)
        return bus

    async def bus_for(
        self,
        given: Bus | None,
        settings: BaseSettings,
        *,
        user: str,
        name: str | None = None,
        readiness: Readiness,
        registry: CollectorRegistry,
    ) -> Bus:
        """``bus`` on ``settings`` as bus user ``user``, then ``require_streams`` for it.

        The connection is named ``name`` (``user`` when not given), uses the settings'
        fast path and credentials, and waits for the streams listening on the settings'
        ``http_host:http_port``: the prelude of every service's start, in one call.
        """
        bus = await self.bus(
            given,
            settings.nats_url,
            name=name or user,
            fast_path=settings.nats_fast_path,
            credentials=NatsCredentials.from_settings(settings),
            user=user,
        )
        await self.require_streams(
            bus,
            user,
            readiness=readiness,
            registry=registry,
            host=settings.http_host,
            port=settings.http_port,
        )
        self._watch_dependencies(registry, bus, user)
        return bus

    def _watch_dependencies(self, registry: CollectorRegistry, bus: Bus, user: str) -> None:
        # The service's view of NATS, its streams and consumers on its /metrics; the pool
        # a later ``pool()`` gives joins it (``kit/dependency_metrics.py``).
        watch = DependencyMetrics(registry, bus, bus_user(user).streams)
        watch.start()
        self._dependencies = watch

        async def unwatch() -> None:
            await watch.stop()
            registry.unregister(watch)
            self._dependencies = None

        self.push(unwatch, name="dependency metrics")

    async def require_streams(
        self,
        bus: Bus,
        user: str,
        *,
        readiness: Readiness,
        registry: CollectorRegistry,
        host: str,
        port: int,
        every: float = 1.0,
    ) -> None:
        """Wait until the streams bus user ``user`` needs exist; services never create them.

        While one is missing the service already listens on ``host:port`` with its ops
        routes only: ``/readyz`` answers 503 naming the missing streams, ``/healthz`` 200
        (it is alive, waiting for the admin step ``mowdeck streams``). Once they exist that
        listener is closed again and the start goes on.
        """
        names = bus_user(user).streams
        if not await bus.missing_streams(names):
            return
        app = web.Application()
        with_ops_routes(app, readiness, registry)
        waiting = HttpServer(app, host, port)

        listening = False

        async def report(missing: list[str]) -> None:
            nonlocal listening
            readiness.set_streams_missing(missing)
            if not listening:
                await waiting.start()
                listening = True

        try:
            await bus.require_streams(names, on_missing=report, every=every)
        finally:
            await waiting.stop()
        readiness.set_not_ready("starting")

    async def pool(self, given: asyncpg.Pool | None, dsn: str, **pool_options: Any) -> asyncpg.Pool:
        """``given``, or a pool created on ``dsn`` with ``pool_options`` and closed at close.

        After ``bus_for``, the pool is probed for the service's /metrics
        (``mowdeck_dependency_up{dependency="postgresql"}``).
        """
        pool: asyncpg.Pool
        if given is not None:
            pool = given
        else:
            pool = await asyncpg.create_pool(dsn, **pool_options)
            self.push(pool.close, name="database pool")
        if self._dependencies is not None:
            self._dependencies.watch_pool(pool)
        return pool

    def authorizer(
        self, given: Authorizer | None, settings: AuthzSettings | None, pool: asyncpg.Pool | None
    ) -> Authorizer:
        """``given``, or one built from ``settings`` (the environment's when None) on
        ``pool`` and closed at close."""
        if given is not None:
            return given
        authorizer = build_authorizer(settings or load_authz_settings(), pool)
        self.push(authorizer.close, name="authorizer")
        return authorizer

    async def serve(self, app: web.Application, host: str, port: int) -> HttpServer:
        """``app`` listening on ``host:port`` now, stopped at close."""
        server = HttpServer(app, host, port)
        await server.start()
        self.push(server.stop, name="http server")
        return server

    def push(
        self, close: Callable[[], Awaitable[object]], *, name: str, timeout: float | None = None
    ) -> None:
        """Run ``close()`` at close, before everything pushed earlier.

        It gets ``timeout`` seconds (the ``part_timeout`` given to ``Resources`` when
        None); a part still closing then is logged, cancelled and left behind, so that one
        stuck part does not keep the rest (the bus's drain above all) from being released.
        """
        bound = self._part_timeout if timeout is None else timeout

        async def closing() -> None:
            part = asyncio.ensure_future(close())
            try:
                done, _ = await asyncio.wait({part}, timeout=bound)
            except asyncio.CancelledError:
                part.cancel()  # the closing is cancelled: so is the part
                raise
            if not done:
                log.error("closing timed out, the rest go on", part=name, timeout_s=bound)
                await cancel_and_wait(part, timeout=1.0, name=name)
                return
            try:
                part.result()
            except Exception:
                log.exception("closing failed", part=name)

        self._stack.push_async_callback(closing)

    def push_sync(self, close: Callable[[], object], *, name: str) -> None:
        """``push`` for a plain function."""

        async def closing() -> None:
            close()

        self.push(closing, name=name)

    def push_task(self, task: asyncio.Future[Any], *, name: str) -> None:
        """Cancel ``task`` at close and wait for it; what it raises then is its own end."""

        async def cancel() -> None:
            await cancel_and_wait(task, name=name)

        self.push(cancel, name=name)

    async def enter(self, cm: AbstractAsyncContextManager[T]) -> T:
        """Enter ``cm`` now and exit it at close."""
        value = await cm.__aenter__()
        self.push(lambda: cm.__aexit__(None, None, None), name=type(cm).__name__)
        return value

    async def close(self) -> None:
        """Release everything in reverse order; a failure is logged and the rest go on.

        Idempotent: what was released is forgotten, so a second close does nothing (and
        the same ``Resources`` may be filled again by a later start).
        """
        await self._stack.aclose()


async def start_all(services: Sequence[Service]) -> list[Service]:
    """Start services in order; on failure stop those already started and re-raise.

    The service whose start failed or was cancelled (a signal) is stopped too, first: a
    start that got halfway may already have taken work (a gateway acknowledges commands
    before its HTTP port is up), and its ``stop`` finishes what it took.
    """
    started: list[Service] = []
    try:
        for service in services:
            started.append(service)
            # What the start creates (tasks, listeners, threads) logs as this service.
            with bound(service=service.name):
                await service.start()
            log.info("service started", service=service.name)
    except BaseException:
        await stop_all(started, timeout=30.0)
        raise
    return started


async def stop_all(services: Sequence[Service], *, timeout: float) -> None:
    """Stop services in reverse start order, each within ``timeout`` seconds."""
    for service in reversed(services):
        try:
            with bound(service=service.name):
                await asyncio.wait_for(service.stop(), timeout=timeout)
            log.info("service stopped", service=service.name)
        except TimeoutError:
            log.error("service did not stop in time", service=service.name, timeout=timeout)
        except Exception:
            log.exception("service failed to stop", service=service.name)


async def run_services(services: Sequence[Service], *, shutdown_timeout: float = 30.0) -> None:
    """Start ``services``, wait for SIGTERM or SIGINT, then stop them in reverse order."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        # A start can wait long (NATS or PostgreSQL not there yet): a signal meanwhile
        # cancels it, and what had started is stopped again, in reverse order.
        starting = asyncio.ensure_future(start_all(services))
        signalled = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({starting, signalled}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            signalled.cancel()
        if not starting.done():
            log.info("shutdown requested while starting")
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
            return
        started = starting.result()
        await stop.wait()
        log.info("shutdown requested")
        await stop_all(started, timeout=shutdown_timeout)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
