"""The watch store port: the rules' memory per mower, and the events decided on it.

Contract: ``tests/unit/notifications/ingest/watch_contract.py``, run against the in-memory
adapter (``memory.py``) and PostgreSQL (``postgres.py``). Operations raise
``StoreRejectedError`` when the store refuses the data itself, ``StoreConflictError``
when the transaction lost a race and was rolled back (plan it again from fresh locks),
``StoreError`` otherwise.

How ingest uses it:

- A batch of states: ``async with store.watches() as tx``: ``tx.lock_versions(mower_ids)``
  (the stamps), ``tx.lock(unsure)`` for the watches the actors may not hold as stored,
  run ``rules.evaluate_state`` again where they differ, ``tx.touch(heartbeats)``,
  ``tx.write(watch_writes, events)``; the commit stores the watches and the pending
  events together (``statebatch.py``). On ``StoreConflictError`` run the batch again.
- Link events: the same, with ``rules.evaluate_link``.
- The offline scan, on every replica: ``async with store.watches() as tx``:
  ``tx.claim_due(now, limit)``, ``rules.evaluate_silence`` each, ``tx.write(...)``.

The alarm changes a transaction writes go to the alarms (``alarms.ports``), by the writer
each adapter is given, in the same transaction.

The events a transaction writes are the fan-out's to claim (``inbox.ports.PendingStore``).
They are written in the watches' transaction (each adapter is given the inbox's writer of
pending events, ADR 0022's one transaction per message): a watch and the events decided on
it are committed together or not at all, so a crash between the rules' commit and the
fan-out delays a notification by a lease instead of losing it (docs/notifications.md,
"Pending events").
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Protocol

from mowdeck.notifications.ingest.model import Stamp, WatchWrite
from mowdeck.notifications.rules.events import AlarmChange, RuleEvent
from mowdeck.notifications.rules.watch import MowerWatch

__all__ = ["WatchStore", "WatchTransaction"]


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

    async def write(
        self,
        watches: Sequence[WatchWrite],
        events: Sequence[RuleEvent],
        alarms: Sequence[AlarmChange] = (),
    ) -> None:
        """Store watches of mowers this transaction locked or claimed, pending events and
        the alarm changes decided on them (in their order).

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


class WatchStore(Protocol):
    """The watches of every mower."""

    def watches(self) -> AbstractAsyncContextManager[WatchTransaction]:
        """A transaction for a batch of states, link events or a scan round."""
        ...

    async def read_watches(self, mower_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, MowerWatch]:
        """The stored watches of ``mower_ids``, without locking."""
        ...
