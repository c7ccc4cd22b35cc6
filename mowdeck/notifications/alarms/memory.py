"""The alarm store in memory: the same contract as PostgreSQL, for unit tests."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime

import msgspec

from mowdeck.notifications.alarms.audit import AuditChange, AuditQuery, AuditRecord, matches
from mowdeck.notifications.alarms.escalation import escalation_event
from mowdeck.notifications.alarms.feed import Written
from mowdeck.notifications.alarms.model import Alarm, AlarmCursor, AlarmPage, AlarmQuery
from mowdeck.notifications.alarms.ports import AlarmStore
from mowdeck.notifications.rules.events import AlarmChange, AlarmChangeKind, RuleEvent

__all__ = ["InMemoryAlarms"]

_replace = msgspec.structs.replace


class InMemoryAlarms(AlarmStore):
    """Alarms as a dict by id; ``apply`` is the watches' writer of changes."""

    def __init__(
        self, pending: Callable[[Sequence[RuleEvent]], object] = lambda _events: None
    ) -> None:
        self._pending = pending
        self.alarms: dict[uuid.UUID, Alarm] = {}
        self.trail: list[AuditRecord] = []

    def _record(self, alarm: Alarm, change: AuditChange, at: datetime, **who: str | None) -> None:
        self.trail.append(
            AuditRecord(
                seq=len(self.trail) + 1,
                at=at,
                account_id=alarm.account_id,
                mower_id=alarm.mower_id,
                alarm_id=alarm.id,
                change=change,
                kind=alarm.kind,
                condition=alarm.condition,
                severity=alarm.severity,
                code=alarm.code,
                **who,
            )
        )

    def _open(self, mower_id: uuid.UUID, condition: str) -> Alarm | None:
        for alarm in self.alarms.values():
            same = (alarm.mower_id, alarm.condition) == (mower_id, condition)
            if same and alarm.state != "cleared":
                return alarm
        return None

    def apply(self, changes: Sequence[AlarmChange]) -> Written:
        """Store the changes the watches decided, in their order (at their commit); the
        alarms as they are after, each with what happened to it."""
        written: list[tuple[Alarm, AlarmChangeKind]] = []
        for c in changes:
            alarm = self._open(c.mower_id, c.condition)
            if c.change == "cleared":
                if alarm is not None:
                    alarm = _replace(alarm, state="cleared", cleared_at=c.at)
                    self.alarms[alarm.id] = alarm
                    written.append((alarm, "cleared"))
                continue
            if alarm is not None:
                alarm = _replace(
                    alarm,
                    latest_at=max(alarm.latest_at, c.at),
                    count=alarm.count + 1,
                    params=c.params,
                )
                self.alarms[alarm.id] = alarm
                written.append((alarm, "updated"))
                continue
            new = Alarm(
                id=uuid.uuid4(),
                account_id=c.account_id,
                mower_id=c.mower_id,
                condition=c.condition,
                kind=c.kind,
                severity=c.severity,
                state="active",
                first_at=c.at,
                latest_at=c.at,
                code=c.code,
                params=dict(c.params),
            )
            self.alarms[new.id] = new
            written.append((new, "raised"))
        for alarm, change in written:
            at = alarm.cleared_at if change == "cleared" and alarm.cleared_at else alarm.latest_at
            self._record(alarm, change, at)
        return written

    async def list_alarms(self, query: AlarmQuery, after: AlarmCursor | None) -> AlarmPage:
        """A page of the account's alarms, newest first."""
        found = [
            a
            for a in self.alarms.values()
            if a.account_id == query.account_id
            and a.state in query.states
            and (query.mowers is None or a.mower_id in query.mowers)
            and (query.severity is None or a.severity == query.severity)
            and (after is None or (a.latest_at, a.id.int) < (after.latest_at, after.id.int))
        ]
        found.sort(key=lambda a: (a.latest_at, a.id.int), reverse=True)
        items = found[: query.limit]
        more = len(found) > query.limit
        return AlarmPage(items, AlarmCursor(items[-1].latest_at, items[-1].id) if more else None)

    async def get_alarm(self, account_id: uuid.UUID, alarm_id: uuid.UUID) -> Alarm | None:
        """The alarm, if it is the account's."""
        alarm = self.alarms.get(alarm_id)
        return alarm if alarm is not None and alarm.account_id == account_id else None

    async def acknowledge(
        self, alarm: Alarm, user_id: str, comment: str | None, at: datetime
    ) -> Alarm:
        """Acknowledge ``alarm`` (the first acknowledgement stays)."""
        stored = self.alarms.get(alarm.id)
        if stored is None:
            return alarm
        stored = _replace(
            stored,
            state="acknowledged" if stored.state == "active" else stored.state,
            acknowledged_by=stored.acknowledged_by or user_id,
            acknowledged_at=stored.acknowledged_at or at,
            comment=stored.comment if comment is None else comment,
        )
        self.alarms[alarm.id] = stored
        self._record(stored, "acknowledged", at, by=user_id, comment=comment)
        return stored

    async def assign(self, alarm: Alarm, assignee: str | None, by: str, at: datetime) -> Alarm:
        """Assign ``alarm`` to ``assignee``."""
        stored = self.alarms.get(alarm.id)
        if stored is None:
            return alarm
        stored = _replace(stored, assignee=assignee, assigned_by=by, assigned_at=at)
        self.alarms[alarm.id] = stored
        self._record(stored, "assigned", at, by=by, assignee=assignee)
        return stored

    async def escalate(self, before: datetime, at: datetime, limit: int) -> list[Alarm]:
        """Escalate active critical alarms raised before ``before`` (each once)."""
        due = sorted(
            (
                a
                for a in self.alarms.values()
                if a.state == "active"
                and a.severity == "critical"
                and a.escalated_at is None
                and a.first_at <= before
            ),
            key=lambda a: a.first_at,
        )[:limit]
        escalated = [_replace(a, escalated_at=at) for a in due]
        for alarm in escalated:
            self.alarms[alarm.id] = alarm
            self._record(alarm, "escalated", at)
        if escalated:
            self._pending([escalation_event(a, at) for a in escalated])
        return escalated

    async def audit_page(self, query: AuditQuery) -> list[AuditRecord]:
        """One page of the account's trail, newest first."""
        found = [r for r in reversed(self.trail) if matches(r, query)]
        return found[: query.limit]

    async def prune_audit(self, before: datetime) -> int:
        """Delete the trail's lines older than ``before``."""
        kept = [r for r in self.trail if r.at >= before]
        gone = len(self.trail) - len(kept)
        self.trail = kept
        return gone

    async def open_counts(self) -> dict[tuple[str, str], int]:
        """Open alarms by kind and severity."""
        counts: dict[tuple[str, str], int] = {}
        for a in self.alarms.values():
            if a.state != "cleared":
                counts[(a.kind, a.severity)] = counts.get((a.kind, a.severity), 0) + 1
        return counts

    async def prune_cleared(self, before: datetime) -> int:
        """Delete alarms cleared before ``before``."""
        gone = [
            a.id
            for a in self.alarms.values()
            if a.state == "cleared" and a.cleared_at is not None and a.cleared_at < before
        ]
        for alarm_id in gone:
            del self.alarms[alarm_id]
        return len(gone)

    def delete_user_rows(self, user_id: str, /) -> int:
        """Take a deleted user's name off the alarms (an ``inbox.erasure`` part)."""
        for a in list(self.alarms.values()):
            names = {
                "acknowledged_by": None if a.acknowledged_by == user_id else a.acknowledged_by,
                "assignee": None if a.assignee == user_id else a.assignee,
                "assigned_by": None if a.assigned_by == user_id else a.assigned_by,
            }
            self.alarms[a.id] = _replace(a, **names)
        return 0

    def delete_mower_rows(self, mower_id: uuid.UUID, /) -> int:
        """Delete a removed mower's alarms (an ``inbox.erasure`` part)."""
        gone = [a.id for a in self.alarms.values() if a.mower_id == mower_id]
        for alarm_id in gone:
            del self.alarms[alarm_id]
        return len(gone)
