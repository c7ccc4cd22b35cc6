"""The alarm round: every replica counts the open alarms and prunes the old cleared ones
and the audit trail's lines past its retention.

Both are cheap and idempotent (a count over the open index, a delete over the cleared
index), so every replica runs them; the gauge is the same on each.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import structlog

from mowdeck.kit.periodic import Periodic
from mowdeck.notifications.alarms.ports import AlarmStore
from mowdeck.notifications.errors import StoreError
from mowdeck.notifications.metrics import NotificationsMetrics
from mowdeck.notifications.rules.alarms import ALARM_KINDS
from mowdeck.notifications.rules.kinds import SEVERITY
from mowdeck.notifications.settings import NotificationsSettings

__all__ = ["AlarmRound", "escalate_after"]

log = structlog.get_logger("mowdeck.notifications.alarms")


def escalate_after(settings: NotificationsSettings) -> timedelta | None:
    """How long a critical alarm may stay unacknowledged; None: never escalated."""
    seconds = settings.notifications_escalate_after_seconds
    return timedelta(seconds=seconds) if seconds > 0 else None


def _nothing() -> None:
    return None


class AlarmRound:
    """Counts open alarms into ``alarms_open`` and prunes cleared ones past retention."""

    def __init__(
        self,
        store: AlarmStore,
        metrics: NotificationsMetrics,
        *,
        interval: float,
        retention: timedelta,
        audit_retention: timedelta = timedelta(days=400),
        escalate_after: timedelta | None = None,
        wake: Callable[[], None] = _nothing,
        clock: Callable[[], datetime],
    ) -> None:
        """``wake`` is called after a round wrote escalations (the fan-out's ``wake``)."""
        self._wake = wake
        self._escalate_after = escalate_after
        self._store = store
        self._metrics = metrics
        self._retention = retention
        self._audit_retention = audit_retention
        self._clock = clock
        self._timer = Periodic("alarm-round", interval, self.round)

    @classmethod
    def of(
        cls,
        settings: NotificationsSettings,
        store: AlarmStore,
        metrics: NotificationsMetrics,
        *,
        wake: Callable[[], None] = _nothing,
        clock: Callable[[], datetime],
    ) -> AlarmRound:
        """The round of ``settings`` (its interval and the retention of cleared alarms)."""
        return cls(
            store,
            metrics,
            interval=settings.notifications_alarm_round_seconds,
            retention=timedelta(days=settings.notifications_alarm_retention_days),
            audit_retention=timedelta(days=settings.notifications_alarm_audit_retention_days),
            escalate_after=escalate_after(settings),
            wake=wake,
            clock=clock,
        )

    async def _escalate(self, now: datetime) -> int:
        if self._escalate_after is None:
            return 0
        count = 0
        while batch := await self._store.escalate(now - self._escalate_after, now, 500):
            count += len(batch)
            if len(batch) < 500:
                break
        return count

    def start(self) -> None:
        """Run a round every interval."""
        self._timer.start()

    async def stop(self) -> None:
        """Stop the timer."""
        await self._timer.stop()

    async def round(self) -> None:
        """Count, then prune; a store failure is logged and the next round tries again."""
        now = self._clock()
        try:
            escalated = await self._escalate(now)
            counts = await self._store.open_counts()
            pruned = await self._store.prune_cleared(now - self._retention)
            trail = await self._store.prune_audit(now - self._audit_retention)
        except StoreError as err:
            log.warning("alarm round failed", error=str(err))
            return
        gauge = self._metrics.alarms_open
        for kind in sorted(ALARM_KINDS):  # none open reads 0, not the last count
            severity = SEVERITY[kind]
            gauge.labels(kind=kind, severity=severity).set(counts.get((kind, severity), 0))
        if escalated:
            self._metrics.alarms_escalated.inc(escalated)
            self._wake()
            log.info("unacknowledged critical alarms told to the admins", alarms=escalated)
        if pruned or trail:
            log.info("cleared alarms and old audit lines pruned", alarms=pruned, audit=trail)
