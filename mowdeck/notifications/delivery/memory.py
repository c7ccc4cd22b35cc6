"""Targets and deliveries in memory: the same contract as PostgreSQL, for unit tests.

``queue`` is what the inbox's ``complete_many`` calls with an event's new items, within
its write (``inbox.ports`` says why); a recipient's locale, time zone and quiet hours are
read through ``preferences`` (the inbox's ``preferences_of``), as PostgreSQL joins them.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Protocol

import msgspec

from mowdeck.notifications.delivery.model import (
    Backlog,
    ClaimedDelivery,
    DeliveryOutcome,
    StoredTarget,
)
from mowdeck.notifications.delivery.plan import summary_due
from mowdeck.notifications.delivery.ports import DeliveryStore, StopListening, TargetStore
from mowdeck.notifications.delivery.targets import Target, WebPushTarget
from mowdeck.notifications.rules.events import Param, RuleEvent
from mowdeck.notifications.rules.quiet import QuietHours
from mowdeck.notifications.rules.templates import SUMMARY_KEY

__all__ = ["DeliveryRow", "InMemoryDeliveries"]


@dataclass
class DeliveryRow:
    """One delivery row."""

    id: int
    target_id: uuid.UUID
    user_id: str
    kind: str
    mower_id: uuid.UUID | None
    severity: str
    dedupe_key: str
    message_key: str
    params: dict[str, Param]
    occurred_at: datetime
    next_attempt_at: datetime
    state: str = "due"
    attempts: int = 0
    last_error: str | None = None
    finished_at: datetime | None = None


class Reader(Protocol):
    """What the deliveries read of a recipient's preferences (the inbox keeps them)."""

    @property
    def locale(self) -> str:
        """The language to render in."""
        ...

    @property
    def timezone(self) -> str:
        """The IANA time zone to render times and quiet hours in."""
        ...

    @property
    def quiet_hours(self) -> QuietHours | None:
        """When nothing is pushed."""
        ...


class InMemoryDeliveries(TargetStore, DeliveryStore):
    """Targets and deliveries as dicts."""

    def __init__(self, *, preferences: Callable[[str], Reader | None]) -> None:
        self._preferences = preferences
        self.targets: dict[uuid.UUID, StoredTarget] = {}
        self.deliveries: dict[int, DeliveryRow] = {}
        self._delivery_ids = itertools.count(1)
        self._wakers: list[Callable[[], None]] = []

    async def add_target(self, user_id: str, target: Target) -> StoredTarget:
        """Register a target; a Web Push endpoint moves to its last registrant."""
        if isinstance(target, WebPushTarget):
            for old in list(self.targets.values()):
                if (
                    isinstance(old.target, WebPushTarget)
                    and old.target.subscription.endpoint == target.subscription.endpoint
                ):
                    if old.user_id == user_id:
                        kept = msgspec.structs.replace(old, target=target)
                        self.targets[old.id] = kept
                        return kept
                    self._drop_target(old.id)
        stored = StoredTarget(
            id=uuid.uuid4(), user_id=user_id, target=target, created_at=datetime.now(UTC)
        )
        self.targets[stored.id] = stored
        return stored

    async def list_targets(
        self,
        user_id: str,
        *,
        after: tuple[datetime, uuid.UUID] | None = None,
        limit: int | None = None,
    ) -> list[StoredTarget]:
        """The user's targets, oldest first, behind ``after``."""
        found = sorted(
            (
                t
                for t in self.targets.values()
                if t.user_id == user_id and (after is None or (t.created_at, t.id) > after)
            ),
            key=lambda t: (t.created_at, t.id),
        )
        return found if limit is None else found[:limit]

    async def delete_target(self, user_id: str, target_id: uuid.UUID) -> bool:
        """Delete the user's target."""
        found = self.targets.get(target_id)
        if found is None or found.user_id != user_id:
            return False
        self._drop_target(target_id)
        return True

    def _drop_target(self, target_id: uuid.UUID) -> None:
        self.targets.pop(target_id, None)
        for row_id in [i for i, r in self.deliveries.items() if r.target_id == target_id]:
            del self.deliveries[row_id]

    def queue(self, event: RuleEvent, inserted: Sequence[tuple[str, bool]]) -> None:
        """Queue the deliveries of ``event``'s new items ``(user_id, held)``."""
        taken = {(r.target_id, r.dedupe_key): r for r in self.deliveries.values()}
        queued = False
        now = datetime.now(UTC)
        for user_id, held in inserted:
            prefs = self._preferences(user_id)
            if held:
                if prefs is None:
                    continue  # held by quiet hours the store does not know
                ends = summary_due(prefs.quiet_hours, prefs.timezone, event.occurred_at, now)
                key, kind, params = f"{SUMMARY_KEY}:{int(ends.timestamp())}", SUMMARY_KEY, {}
                mower, severity, message_key, due = None, "info", SUMMARY_KEY, ends
            else:
                key, kind, params = event.dedupe_key, event.kind, dict(event.params)
                mower, severity, message_key = event.mower_id, event.severity, event.message_key
                ends, due = event.occurred_at, min(event.occurred_at, now)
            for target in [t for t in self.targets.values() if t.user_id == user_id]:
                found = taken.get((target.id, key))
                if found is not None:
                    if held and found.state == "due":
                        found.params = {"count": int(found.params["count"]) + 1}
                    continue
                row = DeliveryRow(
                    id=next(self._delivery_ids),
                    target_id=target.id,
                    user_id=user_id,
                    kind=kind,
                    mower_id=mower,
                    severity=severity,
                    dedupe_key=key,
                    message_key=message_key,
                    params={"count": 1} if held else params,
                    occurred_at=ends,
                    next_attempt_at=due,
                )
                self.deliveries[row.id] = taken[(target.id, key)] = row
                queued = queued or not held
        if queued:
            for wake in list(self._wakers):
                wake()

    async def claim_deliveries(
        self, now: datetime, limit: int, lease: timedelta
    ) -> list[ClaimedDelivery]:
        """Claim due deliveries, most overdue first."""
        due = sorted(
            (r for r in self.deliveries.values() if r.state == "due" and r.next_attempt_at <= now),
            key=lambda r: (r.next_attempt_at, r.id),
        )[:limit]
        claimed = []
        for row in sorted(due, key=lambda r: r.id):
            row.attempts += 1
            row.next_attempt_at = now + lease
            target = self.targets[row.target_id]
            prefs = self._preferences(row.user_id)
            locale, timezone = ("en", "UTC") if prefs is None else (prefs.locale, prefs.timezone)
            claimed.append(
                ClaimedDelivery(
                    id=row.id,
                    target_id=row.target_id,
                    user_id=row.user_id,
                    channel=target.channel,
                    target=msgspec.to_builtins(target.target),
                    kind=row.kind,
                    mower_id=row.mower_id,
                    severity=row.severity,  # type: ignore[arg-type] # written from a Severity
                    dedupe_key=row.dedupe_key,
                    message_key=row.message_key,
                    params=dict(row.params),
                    occurred_at=row.occurred_at,
                    attempts=row.attempts,
                    locale=locale,
                    timezone=timezone,
                )
            )
        return claimed

    async def record_deliveries(self, now: datetime, outcomes: Sequence[DeliveryOutcome]) -> None:
        """Finish, reschedule, or drop with their target."""
        for o in outcomes:
            row = self.deliveries.get(o.id)
            if o.outcome == "gone":
                self._drop_target(o.target_id)
                continue
            if row is None or row.attempts != o.attempts or row.state != "due":
                continue
            if o.outcome == "retry":
                assert o.next_attempt_at is not None
                self.deliveries[o.id] = replace(
                    row, next_attempt_at=o.next_attempt_at, last_error=o.error
                )
            else:
                self.deliveries[o.id] = replace(
                    row, state=o.outcome, finished_at=now, last_error=o.error or None
                )

    async def delivery_backlog(self, now: datetime) -> Backlog:
        """Due deliveries and the oldest due time."""
        due = [
            r.next_attempt_at
            for r in self.deliveries.values()
            if r.state == "due" and r.next_attempt_at <= now
        ]
        return Backlog(len(due), min(due, default=None))

    async def prune_deliveries(self, before: datetime) -> int | None:
        """Delete finished deliveries."""
        old = [i for i, r in self.deliveries.items() if r.finished_at and r.finished_at < before]
        for row_id in old:
            del self.deliveries[row_id]
        return len(old)

    async def listen_deliveries(self, wake: Callable[[], None]) -> StopListening:
        """Call ``wake`` after a completion that queued deliveries."""
        self._wakers.append(wake)

        async def stop() -> None:
            if wake in self._wakers:
                self._wakers.remove(wake)

        return stop

    def delete_user_rows(self, user_id: str, /) -> int:
        """Delete the user's deliveries and targets (an ``inbox.erasure`` part)."""
        deleted = self._delete_deliveries(lambda row: row.user_id == user_id)
        for target_id in [t.id for t in self.targets.values() if t.user_id == user_id]:
            del self.targets[target_id]
            deleted += 1
        return deleted

    def delete_mower_rows(self, mower_id: uuid.UUID, /) -> int:
        """Delete the mower's deliveries (an ``inbox.erasure`` part)."""
        return self._delete_deliveries(lambda row: row.mower_id == mower_id)

    def _delete_deliveries(self, which: Callable[[DeliveryRow], bool]) -> int:
        gone = [i for i, row in self.deliveries.items() if which(row)]
        for row_id in gone:
            del self.deliveries[row_id]
        return len(gone)
