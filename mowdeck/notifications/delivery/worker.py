"""The delivery worker: claims due deliveries, sends them through the channels, records.

Every replica runs one. A claim is a short transaction of its own (FOR UPDATE SKIP
LOCKED, the attempt counted, ``next_attempt_at`` moved by the lease); the sends run
outside any transaction with at most ``notifications_delivery_concurrency`` in flight;
results are recorded in batches. A worker that dies after a send leaves its rows to come
due again after the lease: at least once, and at most one more send per lease.

New rows wake the worker through PostgreSQL LISTEN/NOTIFY (``listen_deliveries``) or
``wake()``; a poll every ``notifications_delivery_poll_seconds`` covers a lost notify
and retries coming due.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from datetime import UTC, datetime

import structlog

from mowdeck.kit.background import cancel_and_wait
from mowdeck.kit.logging import bound
from mowdeck.kit.periodic import Periodic
from mowdeck.notifications.delivery.channels import Delivery, DeliveryResult
from mowdeck.notifications.delivery.channels.loader import ChannelLookup
from mowdeck.notifications.delivery.metrics import DeliveryMetrics
from mowdeck.notifications.delivery.model import ClaimedDelivery, DeliveryOutcome
from mowdeck.notifications.delivery.plan import Backoff, outcome_of
from mowdeck.notifications.delivery.ports import DeliveryStore, StopListening
from mowdeck.notifications.delivery.settings import DeliverySettings
from mowdeck.notifications.errors import TemplateError
from mowdeck.notifications.rules.templates import Catalogue, default_catalogue

__all__ = ["BACKLOG_INTERVAL_SECONDS", "DeliveryWorker"]

log = structlog.get_logger("mowdeck.notifications.delivery.worker")

BACKLOG_INTERVAL_SECONDS = 5.0
_STORE_RETRY_SECONDS = 1.0


def _utcnow() -> datetime:
    return datetime.now(UTC)


class DeliveryWorker:
    """Claims, sends and records deliveries until stopped."""

    def __init__(
        self,
        store: DeliveryStore,
        channels: ChannelLookup,
        settings: DeliverySettings,
        metrics: DeliveryMetrics,
        clock: Callable[[], datetime] = _utcnow,
        *,
        catalogue: Catalogue | None = None,
        listen: bool = True,
    ) -> None:
        self._store = store
        self._channels = channels
        self._settings = settings
        self._metrics = metrics
        metrics.channels(settings.notifications_channels)
        self._clock = clock
        self._catalogue = catalogue or default_catalogue()
        self._listen = listen
        self._backoff = Backoff(
            settings.notifications_retry_initial_seconds,
            settings.notifications_retry_max_seconds,
            settings.notifications_max_attempts,
        )
        self._concurrency = settings.notifications_delivery_concurrency
        self._wakeup = asyncio.Event()
        self._sending: set[asyncio.Task[None]] = set()
        self._results: list[DeliveryOutcome] = []
        self._flusher: asyncio.Task[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop_listening: StopListening | None = None
        # The last claim took every free slot: a finished send should look for more.
        self._saturated = False
        self._backlog = Periodic(
            "notifications-delivery-backlog", BACKLOG_INTERVAL_SECONDS, self.backlog
        )

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The claim loop's task while it runs (for a ``/healthz`` watch)."""
        return self._task

    def start(self) -> None:
        """Start the claim loop and the backlog gauges' timer (idempotent)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="notifications-delivery"
            )
            self._backlog.start()

    def wake(self) -> None:
        """Look for due deliveries now (new rows were committed in this process)."""
        self._wakeup.set()

    async def stop(self) -> None:
        """Stop claiming, let the sends in flight finish (up to a send timeout), record."""
        await self._backlog.stop()
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        if self._sending:
            grace = self._settings.notifications_send_timeout_seconds + 1
            _, pending = await asyncio.wait(set(self._sending), timeout=grace)
            await asyncio.gather(*(cancel_and_wait(task) for task in pending))
        if self._flusher is not None:
            await asyncio.gather(self._flusher, return_exceptions=True)
        if self._stop_listening is not None:
            await self._stop_listening()
            self._stop_listening = None

    async def run_once(self) -> int:
        """One claim round whose sends are awaited and recorded (for tests and tools)."""
        claimed = await self._claim(self._concurrency)
        await asyncio.gather(*set(self._sending))
        if self._flusher is not None:
            await self._flusher
        return claimed

    # -- the loop ------------------------------------------------------------------------

    async def _run(self) -> None:
        if self._listen:
            try:
                self._stop_listening = await self._store.listen_deliveries(self.wake)
            except Exception as err:  # polling still delivers, only later
                log.warning("delivery notifications unavailable; polling", error=str(err))
        poll = self._settings.notifications_delivery_poll_seconds
        while True:
            self._wakeup.clear()
            free = self._concurrency - len(self._sending)
            claimed = 0
            if free > 0:
                try:
                    claimed = await self._claim(free)
                except Exception as err:
                    log.warning("delivery claim failed", error=str(err))
                    await asyncio.sleep(_STORE_RETRY_SECONDS)
                    continue
            self._saturated = free <= 0 or claimed == free
            if self._saturated and len(self._sending) < self._concurrency:
                continue  # more may be due and there is room for it
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), poll)

    async def _claim(self, limit: int) -> int:
        lease = self._settings.lease
        claimed = await self._store.claim_deliveries(self._clock(), limit, lease)
        self._metrics.claims.observe(len(claimed))
        for delivery in claimed:
            task = asyncio.get_running_loop().create_task(self._deliver(delivery))
            self._sending.add(task)
            task.add_done_callback(self._sent)
        return len(claimed)

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._sending.discard(task)
        if self._saturated:
            self._wakeup.set()

    async def _deliver(self, claimed: ClaimedDelivery) -> None:
        # What the delivery and its channel log names the mower it is about.
        with bound(mower_id=claimed.mower_id):
            await self._deliver_bound(claimed)

    async def _deliver_bound(self, claimed: ClaimedDelivery) -> None:
        result = await self._send(claimed)
        outcome = outcome_of(claimed, result, self._clock(), self._backoff)
        self._metrics.deliveries.labels(claimed.channel, outcome.outcome).inc()
        if outcome.outcome == "sent":
            late = (self._clock() - claimed.occurred_at).total_seconds()
            self._metrics.delivered_seconds.labels(claimed.channel).observe(max(late, 0.0))
        if outcome.outcome == "gone":
            self._metrics.gone.labels(claimed.channel).inc()
        if outcome.outcome != "sent":
            log.info(
                "delivery not sent",
                delivery_id=claimed.id,
                channel=claimed.channel,
                outcome=outcome.outcome,
                attempt=claimed.attempts,
                reason=outcome.error,
            )
        self._results.append(outcome)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush())

    async def _send(self, claimed: ClaimedDelivery) -> DeliveryResult:
        channel = self._channels.get(claimed.channel)
        if channel is None:
            return DeliveryResult(status="retry", reason=f"channel {claimed.channel} not started")
        try:
            title, body = self._catalogue.render(
                claimed.message_key, claimed.params, claimed.locale, claimed.timezone
            )
        except TemplateError as err:
            return DeliveryResult(status="failed", reason=f"cannot render: {err}")
        delivery = Delivery(
            delivery_id=str(claimed.id),
            user_id=claimed.user_id,
            channel=claimed.channel,
            target=claimed.target,
            kind=claimed.kind,
            mower_id=str(claimed.mower_id) if claimed.mower_id else "",
            severity=claimed.severity,
            title=title,
            body=body,
            occurred_at=claimed.occurred_at,
            dedupe_key=claimed.dedupe_key,
            attempt=claimed.attempts,
        )
        self._metrics.attempts.labels(claimed.channel).inc()
        started = time.perf_counter()
        try:
            return await channel.send(delivery)
        except Exception as err:
            # A channel must not raise for what the remote side does; one that does is
            # treated as a transient failure, so a bug does not drop notifications.
            log.exception("channel raised", channel=claimed.channel, delivery_id=claimed.id)
            return DeliveryResult(status="retry", reason=f"channel raised {type(err).__name__}")
        finally:
            self._metrics.send_seconds.labels(claimed.channel).observe(
                time.perf_counter() - started
            )

    async def _flush(self) -> None:
        while self._results:
            batch, self._results = self._results, []
            try:
                await self._store.record_deliveries(self._clock(), batch)
            except Exception as err:
                # Not recorded: the rows come due again after their lease and are sent
                # once more (at least once).
                log.warning("delivery results not recorded", count=len(batch), error=str(err))

    # -- the backlog gauges ---------------------------------------------------------------

    async def backlog(self) -> None:
        """Refresh the backlog gauges."""
        now = self._clock()
        backlog = await self._store.delivery_backlog(now)
        self._metrics.due.set(backlog.due)
        oldest = backlog.oldest_due_at
        self._metrics.oldest_due_age.set((now - oldest).total_seconds() if oldest else 0.0)
