"""The outbox relay: publishes committed registry events, in order, at least once."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge

from mowdeck.fleet.ports import MowerRepository, OutboxEvent

__all__ = ["OutboxMetrics", "OutboxRelay", "Publish"]

log = structlog.get_logger("mowdeck.fleet.outbox")

Publish = Callable[[list[OutboxEvent]], Awaitable[None]]
"""Publishes events with ``Nats-Msg-Id`` = event id; returns once JetStream acked all."""


class OutboxMetrics:
    """The relay's metrics."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.published = Counter(
            "mowdeck_fleet_outbox_published_total", "Events relayed to the bus", registry=registry
        )
        self.failures = Counter(
            "mowdeck_fleet_outbox_failures_total", "Relay rounds that failed", registry=registry
        )
        self.pending = Gauge(
            "mowdeck_fleet_outbox_pending", "Events not yet published", registry=registry
        )
        self.lag = Gauge(
            "mowdeck_fleet_outbox_lag_seconds",
            "Age of the oldest unpublished event",
            registry=registry,
        )


class OutboxRelay:
    """Claims unpublished events, publishes them, marks them; woken on commit and by a poll.

    Several replicas may run one each: the repository lets one relay claim at a time. A
    crash after publishing but before marking re-publishes the same ids, which JetStream
    drops inside its duplicate window.
    """

    def __init__(
        self,
        repository: MowerRepository,
        publish: Publish,
        *,
        batch: int = 500,
        poll_seconds: float = 1.0,
        metrics: OutboxMetrics | None = None,
    ) -> None:
        self._repository = repository
        self._publish = publish
        self._batch = batch
        self._poll = poll_seconds
        self._metrics = metrics
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def wake(self) -> None:
        """Look for new events now (call after a commit)."""
        self._wake.set()

    async def relay_once(self) -> int | None:
        """Publish one batch; returns how many, or None when another relay holds the claim."""
        async with self._repository.claim_outbox(self._batch) as claim:
            if claim is None:
                return None
            if claim.events:
                await self._publish(list(claim.events))
                claim.published.extend(e.event_id for e in claim.events)
            count = len(claim.events)
        if count and self._metrics is not None:
            self._metrics.published.inc(count)
        return count

    async def drain(self) -> int:
        """Publish until nothing is owed (or another relay holds the claim); returns how many."""
        total = 0
        while True:
            count = await self.relay_once()
            if not count:
                return total
            total += count

    async def _observe(self) -> None:
        if self._metrics is None:
            return
        stats = await self._repository.outbox_stats()
        self._metrics.pending.set(stats.pending)
        lag = (datetime.now(UTC) - stats.oldest).total_seconds() if stats.oldest else 0.0
        self._metrics.lag.set(max(lag, 0.0))

    async def _run(self) -> None:
        backoff = self._poll
        while True:
            self._wake.clear()
            delay = self._poll
            try:
                count = await self.relay_once()
                if count is None:
                    # Another replica is publishing; look again soon in case it missed ours.
                    delay = min(self._poll, 0.1)
                elif count == self._batch:
                    continue
                await self._observe()
                backoff = self._poll
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("outbox relay failed; retrying")
                if self._metrics is not None:
                    self._metrics.failures.inc()
                backoff = min(backoff * 2, 30.0)
                delay = backoff
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=delay)

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The relay's loop."""
        return self._task

    def start(self) -> None:
        """Run the relay loop in the background."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="fleet-outbox-relay")

    async def stop(self) -> None:
        """Stop the loop, then publish what is still owed once more."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        try:
            await self.drain()
        except Exception:
            log.warning("outbox not drained at stop; the next start publishes it", exc_info=True)
