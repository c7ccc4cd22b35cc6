"""Ordered start and graceful, ordered shutdown on SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

import asyncpg
import structlog
from aiohttp import web

from mowdeck.kit.bus import Bus
from mowdeck.kit.http import HttpServer

__all__ = ["Resources", "Service", "run_services", "start_all", "stop_all"]

log = structlog.get_logger("mowdeck.lifecycle")

T = TypeVar("T")


class Resources:
    """What a service owns, closed in reverse order; built on ``AsyncExitStack``.

    A service pushes each resource as it gets it, so ``close()`` after a start that got
    halfway releases exactly what was started. Each close that fails is logged and the
    others still run; ``close()`` is idempotent.
    """

    def __init__(self) -> None:
        self._stack = contextlib.AsyncExitStack()

    async def bus(self, given: Bus | None, url: str, *, name: str) -> Bus:
        """``given`` (borrowed), or a bus connected now and drained at close."""
        if given is not None:
            return given
        bus = await Bus.connect(url, name=name)
        self.push(bus.drain, name=f"bus {name}")
        return bus

    async def pool(self, given: asyncpg.Pool | None, dsn: str, **pool_options: Any) -> asyncpg.Pool:
        """``given`` (borrowed), or a pool created now and closed at close."""
        if given is not None:
            return given
        pool: asyncpg.Pool = await asyncpg.create_pool(dsn, **pool_options)
        self.push(pool.close, name="database pool")
        return pool

    async def serve(self, app: web.Application, host: str, port: int) -> HttpServer:
        """An HTTP server started now and stopped at close."""
        server = HttpServer(app, host, port)
        await server.start()
        self.push(server.stop, name="http server")
        return server

    def push(self, close: Callable[[], Awaitable[object]], *, name: str) -> None:
        """Run ``close()`` at close, before everything pushed earlier."""

        async def exit_(*_exc: object) -> None:
            try:
                await close()
            except Exception:
                log.exception("close failed", resource=name)

        self._stack.push_async_exit(exit_)

    async def enter(self, cm: contextlib.AbstractAsyncContextManager[T]) -> T:
        """Enter an async context manager now, exit it at close."""
        return await self._stack.enter_async_context(cm)

    async def close(self) -> None:
        """Close everything in reverse order (idempotent)."""
        await self._stack.aclose()


class Service(Protocol):
    """Something with an ordered start and a graceful stop."""

    name: str

    async def start(self) -> None:
        """Start; return when ready to serve."""

    async def stop(self) -> None:
        """Stop gracefully; return when nothing accepted is left undone."""


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
