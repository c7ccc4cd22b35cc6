"""Escalation: a critical alarm nobody acknowledged in time is told to the account's admins.

After ``MOWDECK_NOTIFICATIONS_ESCALATE_AFTER_SECONDS`` (0, the default, turns it off) an
active critical alarm (raised, not acknowledged, not cleared) becomes one
``alarm_escalated`` event: the alarm round claims it (each alarm once, whichever replica
claims it first) and writes the event in the same transaction, and the fan-out tells it
to those of the account's admins who subscribed (``can_admin_mowers`` on the account,
checked at delivery like ``can_view`` for every other kind). An acknowledged or cleared
alarm is never escalated: acknowledging is what stops it.
"""

from __future__ import annotations

from datetime import datetime

from mowdeck.notifications.alarms.model import Alarm
from mowdeck.notifications.rules.events import RuleEvent

__all__ = ["ESCALATED", "escalation_event"]

ESCALATED = "alarm_escalated"


def escalation_event(alarm: Alarm, at: datetime) -> RuleEvent:
    """The event that tells the admins about ``alarm``, unacknowledged at ``at``."""
    return RuleEvent(
        kind="alarm_escalated",
        mower_id=alarm.mower_id,
        account_id=alarm.account_id,
        severity="critical",
        dedupe_key=f"alarm_escalated:{alarm.id}",
        message_key="alarm_escalated",
        params={
            "condition": alarm.condition,
            "open_seconds": max(0, int((at - alarm.first_at).total_seconds())),
        },
        occurred_at=at,
    )
