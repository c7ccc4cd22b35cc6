"""Alarm changes told to whoever follows them, once their transaction committed.

``AlarmFeed`` is what the stores call after a commit that wrote alarms (the watches'
transaction, an acknowledgement, an assignment); ``AlarmAnnouncer`` follows it and
publishes each change as ``notifications.alarm_changed`` for Realtime's streams. The
publish is after the commit and not retried: a client that missed one reads
``GET /v1/alarms`` (a resync), as it does after a gap in any stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import structlog

from contracts.v1 import AlarmChanged, EventEnvelope
from contracts.v1.events import AlarmChangeKind
from mowdeck.kit.background import BackgroundTasks
from mowdeck.kit.publisher import Publisher
from mowdeck.notifications.alarms.model import Alarm

__all__ = ["AlarmAnnouncer", "AlarmFeed", "Written"]

log = structlog.get_logger("mowdeck.notifications.alarms")

Written = Sequence[tuple[Alarm, AlarmChangeKind]]
"""Alarms as they are after a commit, each with what happened to it."""

PRODUCER = "notifications"


class AlarmFeed:
    """Calls every follower with the alarms a committed transaction wrote."""

    def __init__(self) -> None:
        self._followers: list[Callable[[Written], object]] = []

    def follow(self, follower: Callable[[Written], object]) -> None:
        """Hear of every commit that wrote alarms from now on."""
        self._followers.append(follower)

    def __call__(self, written: Written) -> None:
        if written:
            for follower in self._followers:
                follower(written)


def alarm_event(alarm: Alarm, change: AlarmChangeKind, now: datetime) -> EventEnvelope[Any]:
    """The ``notifications.alarm_changed`` event of ``alarm`` after ``change``."""
    payload = AlarmChanged(
        alarm_id=alarm.id,
        mower_id=alarm.mower_id,
        condition=alarm.condition,
        kind=alarm.kind,
        severity=alarm.severity,
        state=alarm.state,
        change=change,
        first_at=alarm.first_at,
        latest_at=alarm.latest_at,
        count=alarm.count,
        code=alarm.code,
        acknowledged_by=alarm.acknowledged_by,
        assignee=alarm.assignee,
        cleared_at=alarm.cleared_at,
    )
    return EventEnvelope.new(
        "notifications.alarm_changed",
        payload,
        producer=PRODUCER,
        now=now,
        account_id=alarm.account_id,
    )


class AlarmAnnouncer:
    """Publishes each alarm change, in the background (a follower of the ``AlarmFeed``)."""

    def __init__(self, publisher: Publisher, clock: Callable[[], datetime]) -> None:
        self._publisher = publisher
        self._clock = clock
        self._tasks = BackgroundTasks()

    def __call__(self, written: Written) -> None:
        self._tasks.spawn(self._publish(list(written)))

    async def _publish(self, written: list[tuple[Alarm, AlarmChangeKind]]) -> None:
        now = self._clock()
        try:
            acks = [await self._publisher.event(alarm_event(a, c, now)) for a, c in written]
        except Exception as err:  # the bus is down: the changes are stored, not streamed
            log.warning("notifications.alarm_changed not published", error=str(err))
            return
        for result in await asyncio.gather(*acks, return_exceptions=True):
            if isinstance(result, BaseException):
                log.warning("notifications.alarm_changed not acknowledged", error=str(result))

    async def stop(self) -> None:
        """Let the publishes under way finish (a few seconds at most), then end them."""
        await self._tasks.wait(5.0)
        await self._tasks.finish()
