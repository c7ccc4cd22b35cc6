"""The events relay: publishes committed registry events, in order, at least once."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import nats.errors
import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge

from mowdeck.fleet.ports import MowerRepository, RegistryEvent
from mowdeck.kit.bus import Bus, BusError
from mowdeck.kit.errors import PublishRefusedError
from mowdeck.kit.former_metric_names import FormerNames
from mowdeck.kit.publisher import Publisher

__all__ = ["ACK_TIMEOUT_SECONDS", "EventsRelay", "EventsRelayMetrics", "Publish", "bus_publisher"]

log = structlog.get_logger("mowdeck.fleet.events_relay")

Publish = Callable[[list[RegistryEvent]], Awaitable[Mapping[uuid.UUID, str]]]
"""Publishes events with ``Nats-Msg-Id`` = event id; returns once JetStream acked every
event it can take, with the events it can never take (by id, with the reason). Raises when
the round is to be tried again (a transient failure)."""

ACK_TIMEOUT_SECONDS = 5.0
# nats-py checks only the payload against the server's max_payload; the server counts the
# headers too (and closes the connection on a violation).
_HEADER_ROOM = 256
# JetStream's codes for a message refused for what it is: message or headers larger than
# the stream allows. A retry is refused the same way.
_REFUSED_CODES = frozenset({10054, 10097})


class EventsRelayMetrics:
    """The relay's metrics (``mowdeck_fleet_outbox_*`` until this release: exposed under
    those names too for one more, ``kit.former_metric_names``)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.published = Counter(
            "mowdeck_fleet_events_relay_published_total",
            "Events relayed to the bus",
            registry=registry,
        )
        self.failures = Counter(
            "mowdeck_fleet_events_relay_failures_total",
            "Relay rounds that failed",
            registry=registry,
        )
        self.pending = Gauge(
            "mowdeck_fleet_events_relay_pending", "Events not yet published", registry=registry
        )
        self.lag = Gauge(
            "mowdeck_fleet_events_relay_lag_seconds",
            "Age of the oldest unpublished event",
            registry=registry,
        )
        self.unpublishable = Counter(
            "mowdeck_fleet_events_relay_unpublishable_total",
            "Events set aside because they can never be published",
            registry=registry,
        )
        self.set_aside = Gauge(
            "mowdeck_fleet_events_relay_set_aside",
            "Events set aside, never published",
            registry=registry,
        )
        FormerNames(
            [
                self.published,
                self.failures,
                self.pending,
                self.lag,
                self.unpublishable,
                self.set_aside,
            ],
            new="mowdeck_fleet_events_relay_",
            old="mowdeck_fleet_outbox_",
            registry=registry,
        )


def bus_publisher(bus: Bus, *, ack_timeout: float = ACK_TIMEOUT_SECONDS) -> Publish:
    """A ``Publish`` on JetStream, many in flight; fails a round whose ack takes ``ack_timeout``.

    nats-py's ack futures never time out and are not failed when the connection drops:
    without the deadline (the kit ``Publisher``'s) one lost ack would hold the relay's
    claim (and its locks) for ever. The msg id de-duplicates what the next round
    publishes again.
    """
    jetstream = Publisher(bus.nc, deadline=ack_timeout)

    async def publish(events: list[RegistryEvent]) -> Mapping[uuid.UUID, str]:
        refused: dict[uuid.UUID, str] = {}
        acks: list[tuple[RegistryEvent, asyncio.Future[Any]]] = []
        limit = bus.nc.max_payload - _HEADER_ROOM
        try:
            for event in events:
                if len(event.body) > limit:
                    refused[event.event_id] = (
                        f"{len(event.body)} bytes exceed the bus's max_payload "
                        f"({bus.nc.max_payload} bytes, headers included)"
                    )
                    continue
                ack = await jetstream.publish(event.subject, event.body, msg_id=str(event.event_id))
                acks.append((event, ack))
            if acks:
                await asyncio.wait([ack for _, ack in acks])
        finally:
            outcomes = _outcomes(acks)
        transient: BaseException | None = None
        for event, error in outcomes:
            if error is None:
                continue
            if _never_publishable(error):
                refused[event.event_id] = str(error)
            elif transient is None:
                transient = error
        if transient is not None:
            raise BusError(f"JetStream did not store an event: {transient}") from transient
        return refused

    return publish


def _outcomes(
    acks: list[tuple[RegistryEvent, asyncio.Future[Any]]],
) -> list[tuple[RegistryEvent, BaseException | None]]:
    # Every future is settled and its error retrieved here, whatever ended the round.
    found: list[tuple[RegistryEvent, BaseException | None]] = []
    for event, ack in acks:
        if not ack.done():
            ack.cancel()  # the round was cancelled: no one waits for this ack any more
        if ack.cancelled():
            found.append((event, BusError("no JetStream acknowledgement")))
        else:
            found.append((event, ack.exception()))
    return found


def _never_publishable(err: BaseException) -> bool:
    if isinstance(err, nats.errors.MaxPayloadError):
        return True
    return isinstance(err, PublishRefusedError) and err.err_code in _REFUSED_CODES


class EventsRelay:
    """Claims unpublished events, publishes them, marks them; woken on commit and by a poll.

    Several replicas may run one each: the repository lets one relay claim at a time. A
    crash after publishing but before marking re-publishes the same ids, which JetStream
    drops inside its duplicate window. An event the bus can never take is set aside (marked
    with the reason), so it does not hold back the events behind it.
    """

    def __init__(
        self,
        repository: MowerRepository,
        publish: Publish,
        *,
        batch: int = 500,
        poll_seconds: float = 1.0,
        metrics: EventsRelayMetrics | None = None,
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
        async with self._repository.claim_unpublished(self._batch) as claim:
            if claim is None:
                return None
            if claim.events:
                refused = await self._publish(list(claim.events))
                for event in claim.events:
                    reason = refused.get(event.event_id)
                    if reason is None:
                        claim.published.append(event.event_id)
                    else:
                        claim.failed[event.event_id] = reason
        for event in claim.events:
            if event.event_id in claim.failed:
                log.error(
                    "event set aside: it can never be published",
                    event_id=str(event.event_id),
                    subject=event.subject,
                    size=len(event.body),
                    error=claim.failed[event.event_id],
                )
        if self._metrics is not None:
            self._metrics.published.inc(len(claim.published))
            self._metrics.unpublishable.inc(len(claim.failed))
        return len(claim.events)

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
        stats = await self._repository.relay_stats()
        self._metrics.pending.set(stats.pending)
        self._metrics.set_aside.set(stats.set_aside)
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
                log.exception("events relay failed; retrying")
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
            self._task = asyncio.create_task(self._run(), name="fleet-events-relay")

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
            log.warning(
                "events not all published at stop; the next start publishes them", exc_info=True
            )
