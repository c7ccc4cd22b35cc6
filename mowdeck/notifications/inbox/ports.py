"""The store port: what the rules, the fan-out, the offline scan and the API need.

Contract: ``tests/unit/notifications/store_contract.py``, run against the in-memory
adapter (``memory.py``) and PostgreSQL (``postgres.py``). Operations raise
``StoreRejectedError`` when the store refuses the data itself, ``StoreConflictError``
when the transaction lost a race and was rolled back (plan it again from fresh locks),
``StoreError`` otherwise.

How the service uses it:

- A batch of states: ``async with store.watches() as tx``: ``tx.lock_versions(mower_ids)``
  (the stamps), ``tx.lock(unsure)`` for the watches the actors may not hold as stored,
  run ``rules.evaluate_state`` again where they differ, ``tx.touch(heartbeats)``,
  ``tx.write(watch_writes, events)``; the commit stores the watches and the pending
  events together (``statebatch.py``). On ``StoreConflictError`` run the batch again.
- Link events: the same, with ``rules.evaluate_link``.
- The offline scan, on every replica: ``async with store.watches() as tx``:
  ``tx.claim_due(now, limit)``, ``rules.evaluate_silence`` each, ``tx.write(...)``.
- The fan-out: ``claim_pending(now, limit, lease)``, pick recipients (``recipients``,
  can_view, ``quiet``), then ``complete_many(completions, inbox_limit)`` for the whole
  claim (``complete_pending`` is one of them); a claim not completed is claimed again
  after its lease.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta
from typing import Protocol

from mowdeck.notifications.delivery.ports import DeliveryStore
from mowdeck.notifications.inbox.model import (
    Completion,
    InboxCursor,
    InboxEntry,
    InboxItem,
    InboxPage,
    PendingEvent,
    Stamp,
    WatchWrite,
)
from mowdeck.notifications.inbox.preferences import Preferences
from mowdeck.notifications.inbox.recipients import Subscriber
from mowdeck.notifications.rules.events import RuleEvent
from mowdeck.notifications.rules.watch import MowerWatch

__all__ = ["NotificationStore", "WatchTransaction"]


class WatchTransaction(Protocol):
    """One transaction over watches; commits on a clean exit of its context."""

    async def lock(self, mower_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, MowerWatch]:
        """Lock the watches of ``mower_ids`` (in mower id order) and return those stored.

        A mower without a watch is locked too, in the sense that ``write`` may create it;
        if another transaction creates it first, ``write`` raises ``StoreConflictError``.
        """
        ...

    async def lock_versions(self, mower_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Stamp]:
        """Lock as ``lock`` does (the same order), without reading the watches: the stored
        ``Stamp`` of each (its version counts the writes that changed the watch)."""
        ...

    async def claim_due(self, now: datetime, limit: int) -> list[MowerWatch]:
        """Lock up to ``limit`` watches whose silence is due by ``now``, skipping watches
        another transaction holds; most overdue first."""
        ...

    async def write(self, watches: Sequence[WatchWrite], events: Sequence[RuleEvent]) -> None:
        """Store watches of mowers this transaction locked or claimed, and pending events.

        The last write of a mower wins. Writing a watch not locked or claimed here is a
        programming error (``ValueError``).

        For a claimed watch ``silence_due_at`` is stored as given; for a locked one the
        stored time only moves earlier (it is a lower bound the scan corrects). A write
        with ``changed`` stores the watch as a new version; without, only the due time.
        """
        ...

    async def touch(self, watches: Sequence[MowerWatch]) -> None:
        """Store only the ``observed_at`` and ``contact_at`` of locked watches (neither
        ever goes back); the rest of each, its version and due time stay as stored."""
        ...


class NotificationStore(DeliveryStore, Protocol):
    """Notifications storage (with targets and deliveries, ``DeliveryStore``)."""

    def watches(self) -> AbstractAsyncContextManager[WatchTransaction]:
        """A transaction for a batch of states, link events or a scan round."""
        ...

    async def read_watches(self, mower_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, MowerWatch]:
        """The stored watches of ``mower_ids``, without locking."""
        ...

    async def claim_pending(
        self, now: datetime, limit: int, lease: timedelta
    ) -> list[PendingEvent]:
        """Claim up to ``limit`` pending events not claimed at ``now`` (oldest first) for
        ``lease``, counting the attempt; events another replica holds are skipped."""
        ...

    async def complete_pending(
        self,
        pending_id: int,
        event: RuleEvent,
        entries: Sequence[InboxEntry],
        inbox_limit: int,
    ) -> list[InboxItem]:
        """In one transaction: store ``event`` in the inbox of each entry's user (once per
        user and dedupe key), drop the pending event, and trim each user who got a new
        item to the newest ``inbox_limit``. Returns the items that were new and survived
        the trim (an item older than a user's newest ``inbox_limit`` goes at once).

        The same transaction queues the deliveries of the surviving new items: one per
        target of each user whose item is not held by quiet hours; a held item counts
        into the quiet-hours summary of each of the user's targets instead.
        """
        ...

    async def complete_many(
        self, completions: Sequence[Completion], inbox_limit: int
    ) -> list[list[InboxItem]]:
        """``complete_pending`` for several events in one transaction; the items per
        completion, in order. Of two events with the same dedupe key for one user the
        earlier in ``completions`` gets the item; the trim runs once, after every insert."""
        ...

    async def discard_pending(self, pending_id: int) -> bool:
        """Drop a pending event without fan-out (it failed too often); False if gone."""
        ...

    async def get_preferences(self, user_id: str) -> Preferences | None:
        """The user's saved preferences; None when they never saved any."""
        ...

    async def put_preferences(
        self, user_id: str, account_id: uuid.UUID, preferences: Preferences
    ) -> None:
        """Save the user's preferences (replacing what was saved)."""
        ...

    async def subscribers(self, account_id: uuid.UUID) -> list[Subscriber]:
        """The account's users whose scope is not ``none``, by user id."""
        ...

    async def subscribers_of(
        self, account_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, list[Subscriber]]:
        """``subscribers`` of each of ``account_ids`` (every one a key, maybe with none)."""
        ...

    async def inbox_page(
        self, user_id: str, limit: int, cursor: InboxCursor | None = None
    ) -> InboxPage:
        """Up to ``limit`` of the user's items, newest first, behind ``cursor``."""
        ...

    async def unread_count(self, user_id: str) -> int:
        """How many of the user's items are unread."""
        ...

    async def mark_read(self, user_id: str, ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        """Mark the user's items among ``ids`` read; returns those that are the user's."""
        ...

    async def delete_user(self, user_id: str) -> int:
        """Delete the user's preferences, inbox, targets and deliveries; returns the rows
        deleted."""
        ...

    async def forget_mower(self, mower_id: uuid.UUID) -> int:
        """Delete the mower's watch, pending events, inbox items and deliveries, and drop
        it from every selection; returns the rows deleted."""
        ...
