"""Ordered start and graceful, ordered shutdown on SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Sequence
from typing import Protocol

import structlog

__all__ = ["Service", "run_services", "start_all", "stop_all"]

log = structlog.get_logger("mowdeck.lifecycle")


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
