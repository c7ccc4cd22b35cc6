"""The offline timer: a scan on every replica that claims due watches FOR UPDATE SKIP LOCKED.

Each round claims up to a batch of watches whose silence is due, runs
``rules.evaluate_silence`` on them (``plan_silence``) and writes them back with their
exact next due time, in one short transaction. A watch another replica's scan or a
state batch holds is skipped, not waited for. While the NATS connection is down the
scan does nothing, and after it is back silence counts from then (``ConsumingSince``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import datetime

import structlog

from mowdeck.kit.periodic import Periodic
from mowdeck.notifications.ingest.consuming import ConsumingSince
from mowdeck.notifications.ingest.plan import Plan, plan_silence
from mowdeck.notifications.ingest.ports import WatchStore
from mowdeck.notifications.ingest.states import count_plan
from mowdeck.notifications.metrics import NotificationsMetrics
from mowdeck.notifications.rules.evaluate import Thresholds

__all__ = ["OfflineScan"]

log = structlog.get_logger("mowdeck.notifications.ingest.offline")


class OfflineScan:
    """The silence timer: a ``round`` every ``interval`` seconds once started."""

    def __init__(
        self,
        store: WatchStore,
        *,
        thresholds: Thresholds,
        consuming: ConsumingSince,
        metrics: NotificationsMetrics,
        clock: Callable[[], datetime],
        on_events: Callable[[], object],
        batch: int,
        interval: float,
    ) -> None:
        self._store = store
        self._thresholds = thresholds
        self._consuming = consuming
        self._metrics = metrics
        self._clock = clock
        self._on_events = on_events
        self._batch = batch
        self._timer = Periodic("notifications-offline-scan", interval, self.round)

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The timer's task while it runs (for a ``/healthz`` watch)."""
        return self._timer.task

    def start(self) -> None:
        """Run a round every interval."""
        self._timer.start()

    async def stop(self) -> None:
        """Stop the timer (a round in progress is cancelled; its transaction rolls back)."""
        await self._timer.stop()

    async def round(self) -> Plan | None:
        """Claim and evaluate due watches until fewer than a batch are due; None when the
        bus is down (nothing is consumed, so no mower can be told silent)."""
        if not self._consuming.consuming():
            return None
        total = Plan()
        while True:
            now = self._clock()
            started = time.perf_counter()
            async with self._store.watches() as tx:
                claimed = await tx.claim_due(now, self._batch)
                plan = plan_silence(claimed, now, self._consuming.since, self._thresholds)
                await tx.write(plan.writes, plan.events, plan.alarms)
            metrics = self._metrics
            metrics.commit_seconds.labels(source="scan").observe(time.perf_counter() - started)
            metrics.offline_scans.inc()
            metrics.offline_claims.inc(len(claimed))
            count_plan(metrics, plan, "scan")
            total.writes += plan.writes
            total.events += plan.events
            total.alarms += plan.alarms
            if plan.events:
                self._on_events()
            if len(claimed) < self._batch:
                return total
