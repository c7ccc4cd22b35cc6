"""The inbox's ports: pending events for the fan-out, the inbox, preferences, erasure.

Contracts: ``tests/unit/notifications/inbox/inbox_contract.py`` (``PendingStore``,
``InboxStore``), ``preferences_contract.py`` and ``erasure_contract.py``, run against the
in-memory adapters (``memory.py``, ``erasure.py``) and PostgreSQL (``postgres.py``,
``erasure.py``). Errors as ``ingest.ports`` says.

The adapters subclass the ports (``complete_pending`` is ``complete_many`` of one).

How the fan-out uses them: ``claim_pending(now, limit, lease)``, pick recipients
(``subscribers_of``, ``recipients``, can_view, ``quiet``), then ``complete_many(completions,
inbox_limit)`` for the whole claim (``complete_pending`` is one of them); a claim not
completed is claimed again after its lease.

One transaction spans two parts here: ADR 0022 has the fan-out write the inbox items and
one delivery row per channel target in one transaction, so that a notification in the
inbox is never without its deliveries nor the other way round. ``complete_many`` keeps
that: each adapter is given the delivery part's queue of deliveries and calls it with
the new items inside its own transaction (``postgres.py``, ``memory.py``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Protocol

from mowdeck.notifications.inbox.model import (
    Completion,
    InboxCursor,
    InboxEntry,
    InboxItem,
    InboxPage,
    PendingEvent,
)
from mowdeck.notifications.inbox.preferences import Preferences
from mowdeck.notifications.inbox.recipients import Subscriber
from mowdeck.notifications.rules.events import RuleEvent

__all__ = ["Erasure", "InboxStore", "PendingStore", "PreferencesStore"]


class PendingStore(Protocol):
    """The events the rules decided, waiting for their fan-out (written by ingest)."""

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
        done = Completion(pending_id=pending_id, event=event, entries=tuple(entries))
        return (await self.complete_many([done], inbox_limit))[0]

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


class InboxStore(Protocol):
    """What each user was told."""

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


class PreferencesStore(Protocol):
    """What each user chose to hear about."""

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


class Erasure(Protocol):
    """A user's or a mower's data in every part, in one transaction (``erasure.py``)."""

    async def delete_user(self, user_id: str) -> int:
        """Delete the user's preferences, inbox, targets and deliveries; returns the rows
        deleted."""
        ...

    async def forget_mower(self, mower_id: uuid.UUID) -> int:
        """Delete the mower's watch, pending events, inbox items and deliveries, and drop
        it from every selection; returns the rows deleted."""
        ...
