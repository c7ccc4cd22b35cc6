"""The fan-out: pending events to inbox items, recipients re-checked, then notifications.sent.

A round claims up to ``notifications_fanout_batch`` pending events (FOR UPDATE SKIP
LOCKED, a short transaction of its own), picks their recipients outside any transaction
(the subscribers of the round's accounts in one query, their scope and kinds, one
``check_pairs(can_view)`` for every mower's users of the round, quiet hours), then
completes every event of the round in one transaction (inbox items, pending rows gone,
inboxes trimmed, deliveries queued) and publishes ``event.notifications.sent`` for each
new item, rendered in the reader's locale. One round runs at a time, so a replica holds
one pooled connection for it. A failed event stays claimed until its lease runs out and
is tried again, up to ``notifications_fanout_max_attempts`` claims. The fan-out is woken
at once after a commit of this replica wrote events, and polls for other replicas'
events.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import NamedTuple

import msgspec
import structlog

from contracts.v1 import EventEnvelope, NotificationSent
from mowdeck.authz import DecisionCache, account_object, mower_object, user_ref
from mowdeck.kit.logging import bound
from mowdeck.kit.publisher import Publisher
from mowdeck.notifications.alarms.escalation import ESCALATED
from mowdeck.notifications.errors import StoreRejectedError
from mowdeck.notifications.inbox.model import Completion, InboxEntry, InboxItem, PendingEvent
from mowdeck.notifications.inbox.ports import PendingStore, PreferencesStore
from mowdeck.notifications.inbox.recipients import Subscriber, recipients
from mowdeck.notifications.metrics import NotificationsMetrics
from mowdeck.notifications.rules.quiet import held_by_quiet_hours
from mowdeck.notifications.rules.templates import render
from mowdeck.notifications.settings import NotificationsSettings

__all__ = ["FanOut", "viewers"]

log = structlog.get_logger("mowdeck.notifications.inbox.fanout")
PRODUCER = "notifications"


async def viewers(
    decisions: DecisionCache, wanted: dict[uuid.UUID, list[str]]
) -> dict[uuid.UUID, set[str]]:
    """Per mower, those of its users who may view it: one ``check_pairs`` for every
    decision not cached."""
    pairs = [(user_ref(u), mower_object(m)) for m, users in wanted.items() for u in users]
    answers = await decisions.check_pairs(pairs, "can_view")
    return {
        mower_id: {u for u in users if answers[(user_ref(u), mower_object(mower_id))]}
        for mower_id, users in wanted.items()
    }


class _Picked(NamedTuple):
    """A claimed event, what to write for it, and its readers (for the locale)."""

    pending: PendingEvent
    completion: Completion
    readers: dict[str, Subscriber]


class FanOut:
    """Runs fan-out rounds when woken and every ``poll`` seconds."""

    def __init__(
        self,
        pending: PendingStore,
        preferences: PreferencesStore,
        *,
        decisions: DecisionCache,
        publisher: Publisher,
        names: Callable[[uuid.UUID], str | None],
        settings: NotificationsSettings,
        metrics: NotificationsMetrics,
        clock: Callable[[], datetime],
        poll: float = 1.0,
    ) -> None:
        self._pending = pending
        self._preferences = preferences
        self._decisions = decisions
        self._publisher = publisher
        self._names = names
        self._settings = settings
        self._metrics = metrics
        self._clock = clock
        self._poll = poll
        self._wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def wake(self) -> None:
        """Run a round now (events were just committed)."""
        self._wake.set()

    def start(self) -> None:
        """Start the fan-out task."""
        self.task = asyncio.get_running_loop().create_task(self._run(), name="notifications-fanout")

    async def stop(self) -> None:
        """Stop the task; an event in hand is claimed again after its lease."""
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
            self.task = None

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._poll)
            self._wake.clear()
            try:
                while await self.round() >= self._settings.notifications_fanout_batch:
                    pass
            except Exception:
                log.exception("fan-out round failed")

    async def round(self) -> int:
        """Claim a batch of pending events and fan them out; returns how many were claimed."""
        s = self._settings
        claimed = await self._pending.claim_pending(
            self._clock(), s.notifications_fanout_batch, s.fanout_lease
        )
        live: list[PendingEvent] = []
        for pending in claimed:
            if pending.attempts > s.notifications_fanout_max_attempts:
                await self._discard(pending)
            else:
                live.append(pending)
        if live:
            try:
                picked = await self._pick(live)
            except Exception as err:
                self._failed(live, "recipients", err)
                return len(claimed)
            await self._complete(picked)
        return len(claimed)

    async def _discard(self, pending: PendingEvent) -> None:
        try:
            dropped = await self._pending.discard_pending(pending.id)
        except Exception as err:
            self._failed([pending], "discard", err)
            return
        if dropped:
            self._metrics.fanout_discarded.inc()
            event = pending.event
            with bound(mower_id=event.mower_id, account_id=event.account_id):
                log.error("pending event dropped after too many attempts", pending_id=pending.id)

    def _failed(self, events: Sequence[PendingEvent], stage: str, err: Exception) -> None:
        """Count and log events left claimed: they are tried again after the lease."""
        self._metrics.fanout_failures.inc(len(events))
        for pending in events:
            event = pending.event
            with bound(mower_id=event.mower_id, account_id=event.account_id):
                log.error(
                    "fan-out failed; tried again after the lease",
                    stage=stage,
                    exc_info=err,
                    pending_id=pending.id,
                    attempts=pending.attempts,
                )

    async def _pick(self, events: list[PendingEvent]) -> list[_Picked]:
        """The recipients of a round's events: the subscribers of its accounts in one
        query, then one ``check_pairs`` for every mower's users."""
        metrics = self._metrics
        accounts = list(dict.fromkeys(p.event.account_id for p in events))
        subscribers = await self._preferences.subscribers_of(accounts)
        wanted = {p.id: recipients(subscribers[p.event.account_id], p.event) for p in events}
        users: dict[uuid.UUID, set[str]] = {}
        for p in events:
            users.setdefault(p.event.mower_id, set()).update(w.user_id for w in wanted[p.id])
        allowed = await viewers(self._decisions, {m: sorted(us) for m, us in users.items() if us})
        admins = await self._admins(events, wanted)
        picked = []
        for pending in events:
            event, mine = pending.event, wanted[pending.id]
            if not mine:
                metrics.suppressed.labels(reason="not_subscribed").inc()
            can_view = allowed.get(event.mower_id, set())
            chosen = [w for w in mine if w.user_id in can_view]
            if event.kind == ESCALATED:  # told to the account's admins only
                chosen = [w for w in chosen if (w.user_id, event.account_id) in admins]
            if len(chosen) < len(mine):
                metrics.suppressed.labels(reason="not_viewable").inc(len(mine) - len(chosen))
            entries = []
            for sub in chosen:
                prefs = sub.preferences
                held = held_by_quiet_hours(
                    prefs.quiet_hours, prefs.timezone, event.occurred_at, event.severity
                )
                if held:
                    metrics.suppressed.labels(reason="quiet_hours").inc()
                entries.append(InboxEntry(user_id=sub.user_id, held_by_quiet_hours=held))
            name = self._names(event.mower_id) or str(event.mower_id)[:8]
            named = msgspec.structs.replace(event, params={**event.params, "mower": name})
            done = Completion(pending_id=pending.id, event=named, entries=tuple(entries))
            picked.append(_Picked(pending, done, {sub.user_id: sub for sub in chosen}))
        return picked

    async def _admins(
        self, events: list[PendingEvent], wanted: dict[int, list[Subscriber]]
    ) -> set[tuple[str, uuid.UUID]]:
        """(user, account) of the escalations' subscribers who admin the account."""
        asked = {
            (w.user_id, p.event.account_id)
            for p in events
            if p.event.kind == ESCALATED
            for w in wanted[p.id]
        }
        if not asked:
            return set()
        pairs = {(user_ref(u), account_object(a)): (u, a) for u, a in asked}
        answers = await self._decisions.check_pairs(list(pairs), "can_admin_mowers")
        return {who for pair, who in pairs.items() if answers[pair]}

    async def _complete(self, picked: list[_Picked]) -> None:
        """One transaction for every event of the round, then their notifications.sent."""
        limit = self._settings.notifications_inbox_limit
        try:
            written = await self._pending.complete_many([p.completion for p in picked], limit)
        except StoreRejectedError:
            # One event's values were refused: complete the others on their own.
            written = []
            for p in picked:
                try:
                    written += await self._pending.complete_many([p.completion], limit)
                except Exception as err:
                    self._failed([p.pending], "inbox write", err)
                    written.append([])
        except Exception as err:
            self._failed([p.pending for p in picked], "inbox write", err)
            return
        self._metrics.inbox_items.inc(sum(len(items) for items in written))
        await self._announce(
            [(items, p.readers) for p, items in zip(picked, written, strict=True) if items]
        )

    async def _announce(self, batches: list[tuple[list[InboxItem], dict[str, Subscriber]]]) -> None:
        acks = []
        for item, readers in ((i, r) for items, r in batches for i in items):
            prefs = readers[item.user_id].preferences
            title, body = render(item.message_key, item.params, prefs.locale, prefs.timezone)
            payload = NotificationSent(
                notification_id=item.id,
                user_id=item.user_id,
                mower_id=item.mower_id,
                kind=item.kind,
                severity=item.severity,
                dedupe_key=item.dedupe_key,
                title=title,
                body=body,
            )
            envelope = EventEnvelope.new(
                "notifications.sent",
                payload,
                producer=PRODUCER,
                now=self._clock(),
                account_id=item.account_id,
            )
            acks.append(await self._publisher.event(envelope))
        for result in await asyncio.gather(*acks, return_exceptions=True):
            if isinstance(result, BaseException):
                # The inbox item is stored; the in-app feed misses this one live.
                log.warning("notifications.sent not acknowledged", error=str(result))
            else:
                self._metrics.sent_published.inc()
