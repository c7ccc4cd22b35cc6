"""What the deliveries store and hand out: targets, claimed deliveries, outcomes."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

import msgspec

# channels first: targets imports the channels' settings, whose package imports targets.
from mowdeck.notifications.delivery.channels.port import Severity
from mowdeck.notifications.delivery.targets import Target
from mowdeck.notifications.rules.events import Param

__all__ = ["Backlog", "ClaimedDelivery", "DeliveryOutcome", "OutcomeKind", "StoredTarget"]

OutcomeKind = Literal["sent", "retry", "failed", "gone"]


class StoredTarget(msgspec.Struct, frozen=True, kw_only=True):
    """A registered target of a user."""

    id: uuid.UUID
    user_id: str
    target: Target
    created_at: datetime

    @property
    def channel(self) -> str:
        """The target's channel name."""
        tag: str = self.target.__struct_config__.tag  # type: ignore[assignment]
        return tag


class ClaimedDelivery(msgspec.Struct, frozen=True, kw_only=True):
    """A due delivery a worker holds for its lease; ``attempts`` counts this one."""

    id: int
    target_id: uuid.UUID
    user_id: str
    channel: str
    target: dict[str, Any]
    kind: str
    mower_id: uuid.UUID | None
    severity: Severity
    dedupe_key: str
    message_key: str
    params: dict[str, Param]
    occurred_at: datetime
    attempts: int
    locale: str = "en"
    timezone: str = "UTC"

    def __repr__(self) -> str:
        # The target may hold an access token.
        return (
            f"ClaimedDelivery(id={self.id}, user_id={self.user_id!r}, channel={self.channel!r},"
            f" kind={self.kind!r}, attempts={self.attempts})"
        )


class DeliveryOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """What to record of one send.

    ``sent`` and ``failed`` finish the delivery; ``retry`` moves it to
    ``next_attempt_at``; ``gone`` deletes its target (and so the delivery). ``attempts``
    is the claim's count: a result of a claim that was taken over after its lease is
    not recorded over the newer claim.
    """

    id: int
    attempts: int
    target_id: uuid.UUID
    outcome: OutcomeKind
    next_attempt_at: datetime | None = None
    error: str = ""


class Backlog(msgspec.Struct, frozen=True):
    """Due deliveries now, and when the oldest of them came due."""

    due: int
    oldest_due_at: datetime | None
