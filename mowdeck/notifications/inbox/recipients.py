"""Which of an account's subscribers want an event: their scope and their kinds.

This is the pure first cut of ADR 0022's recipient rule. The service then asks
``can_view`` on the mower for those who are left, in one batch, before anything is
stored: a user whose access was revoked after subscribing gets nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import msgspec

from mowdeck.notifications.inbox.preferences import Preferences
from mowdeck.notifications.rules.events import RuleEvent
from mowdeck.notifications.rules.kinds import Kind

__all__ = ["Subscriber", "recipients", "wants"]


class Subscriber(msgspec.Struct, frozen=True, kw_only=True):
    """A user of an account with their stored preferences."""

    user_id: str
    account_id: uuid.UUID
    preferences: Preferences


def wants(preferences: Preferences, mower_id: uuid.UUID, kind: Kind) -> bool:
    """Whether preferences ask for ``kind`` about ``mower_id``."""
    return preferences.covers(mower_id) and preferences.wants(kind)


def recipients(subscribers: Iterable[Subscriber], event: RuleEvent) -> list[Subscriber]:
    """The subscribers of the event's account who want it, in the order given."""
    return [
        s
        for s in subscribers
        if s.account_id == event.account_id and wants(s.preferences, event.mower_id, event.kind)
    ]
