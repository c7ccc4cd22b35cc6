"""The delivery's ports: targets, and the deliveries the fan-out queues for the workers.

Contract: ``tests/unit/notifications/delivery/delivery_contract.py``, run against the
in-memory adapter and PostgreSQL. The fan-out's ``PendingStore.complete_many`` writes the
delivery rows (the inbox store is given this part's queue, ``queue_deliveries`` or
``InMemoryDeliveries.queue``): one per target of every recipient whose new item is not
held by quiet hours, and, for an item that is held, one more in the quiet-hours summary
of each of the user's targets (due when the quiet hours end), in the inbox item's
transaction. The deliveries read the recipient's locale, time zone and quiet hours from
the inbox's preferences.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from mowdeck.notifications.delivery.model import (
    Backlog,
    ClaimedDelivery,
    DeliveryOutcome,
    StoredTarget,
)
from mowdeck.notifications.delivery.targets import Target

__all__ = ["DeliveryStore", "StopListening", "TargetStore"]

StopListening = Callable[[], Awaitable[None]]


class TargetStore(Protocol):
    """Where each user is reached."""

    async def add_target(self, user_id: str, target: Target) -> StoredTarget:
        """Register ``target`` for the user. A Web Push endpoint registered before (by
        anyone) is replaced: it belongs to the last user who registered it, and the
        previous owner's deliveries to it are dropped."""
        ...

    async def list_targets(
        self,
        user_id: str,
        *,
        after: tuple[datetime, uuid.UUID] | None = None,
        limit: int | None = None,
    ) -> list[StoredTarget]:
        """The user's targets, oldest first (by creation, then id): those behind the
        position ``after`` only unless None, at most ``limit`` unless None."""
        ...

    async def delete_target(self, user_id: str, target_id: uuid.UUID) -> bool:
        """Delete the user's target and its deliveries; False if the user has no such one."""
        ...


class DeliveryStore(Protocol):
    """The deliveries, for the workers that send them."""

    async def claim_deliveries(
        self, now: datetime, limit: int, lease: timedelta
    ) -> list[ClaimedDelivery]:
        """Claim up to ``limit`` due deliveries (most overdue first) for ``lease``,
        counting the attempt; rows another worker holds are skipped."""
        ...

    async def record_deliveries(self, now: datetime, outcomes: Sequence[DeliveryOutcome]) -> None:
        """Record sends in one transaction; an outcome whose claim was taken over (its
        ``attempts`` is no longer the row's) is ignored."""
        ...

    async def delivery_backlog(self, now: datetime) -> Backlog:
        """How many deliveries are due at ``now``, and the oldest due time."""
        ...

    async def prune_deliveries(self, before: datetime) -> int | None:
        """Delete deliveries finished before ``before``; None if another replica prunes."""
        ...

    async def listen_deliveries(self, wake: Callable[[], None]) -> StopListening:
        """Call ``wake`` whenever new deliveries were committed (best effort: a wake may
        be lost, so workers also poll); returns the function that stops listening."""
        ...
