"""The alarm store port.

Contract: ``tests/unit/notifications/alarms/alarm_contract.py``, run against the
in-memory adapter (``memory.py``) and PostgreSQL (``postgres.py``).

The changes the watches decide (``rules.alarms``) are written in the watches'
transaction, by the writer each watch adapter is given (``PostgresAlarms.write_changes``
on its connection, ``InMemoryAlarms.apply``): a watch and the alarms decided on it commit
together. A change raising a condition that is open already updates it (its latest
telling, its count); clearing one that is not open changes nothing.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Protocol

from mowdeck.notifications.alarms.audit import AuditQuery, AuditRecord
from mowdeck.notifications.alarms.model import Alarm, AlarmCursor, AlarmPage, AlarmQuery

__all__ = ["AlarmStore"]


class AlarmStore(Protocol):
    """The alarms of every account."""

    async def list_alarms(self, query: AlarmQuery, after: AlarmCursor | None) -> AlarmPage:
        """A page of the account's alarms matching ``query``, behind ``after``."""
        ...

    async def get_alarm(self, account_id: uuid.UUID, alarm_id: uuid.UUID) -> Alarm | None:
        """The alarm, if it is one of the account's."""
        ...

    async def acknowledge(
        self, alarm: Alarm, user_id: str, comment: str | None, at: datetime
    ) -> Alarm:
        """Acknowledge ``alarm`` by ``user_id`` (an active one becomes acknowledged; a
        cleared one keeps its state and records who acknowledged it). Acknowledging again
        keeps the first acknowledgement and replaces the comment when one is given."""
        ...

    async def assign(self, alarm: Alarm, assignee: str | None, by: str, at: datetime) -> Alarm:
        """Assign ``alarm`` to ``assignee`` (None: to nobody)."""
        ...

    async def audit_page(self, query: AuditQuery) -> list[AuditRecord]:
        """One page of the account's audit trail (``audit.py``), newest first: every
        change written with the change itself (raised, updated and cleared by the
        watches' writer; acknowledged and assigned by ``acknowledge`` and ``assign``)."""
        ...

    async def prune_audit(self, before: datetime) -> int:
        """Delete the trail's lines older than ``before``; how many."""
        ...

    async def escalate(self, before: datetime, at: datetime, limit: int) -> list[Alarm]:
        """Mark at most ``limit`` active critical alarms raised before ``before`` escalated
        at ``at`` and write their ``alarm_escalated`` events (``escalation.py``) in the
        same transaction, with a line each in the trail; the alarms escalated. Each alarm
        is escalated once, whichever replica asks; an acknowledged one never."""
        ...

    async def open_counts(self) -> dict[tuple[str, str], int]:
        """The alarms not cleared, counted by ``(kind, severity)``, every account."""
        ...

    async def prune_cleared(self, before: datetime) -> int:
        """Delete alarms cleared before ``before``; how many."""
        ...
