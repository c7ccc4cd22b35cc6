"""Writing through the stores in tests: watches, events, pending events and their fan-out."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from mowdeck.notifications.inbox.model import InboxEntry
from mowdeck.notifications.infra import Stores
from mowdeck.notifications.ingest.model import WatchWrite
from mowdeck.notifications.rules.events import RuleEvent
from mowdeck.notifications.rules.kinds import SEVERITY, Kind
from mowdeck.notifications.rules.watch import MowerWatch
from tests.unit.notifications.samples import ACCOUNT, MOWER, at, first_watch

LEASE = timedelta(seconds=60)
THIRD_MOWER = uuid.UUID("00000000-0000-4000-8000-000000000003")
PARAMS = {"battery": 18, "mower": "Robbie"}


def watch_of(mower_id: uuid.UUID = MOWER, seconds: float = 0, **fields: Any) -> MowerWatch:
    """The watch a first state of ``mower_id`` at ``seconds`` starts."""
    return first_watch(seconds, mower_id=mower_id, **fields)


def event(
    key: str = "k",
    seconds: float = 0,
    *,
    kind: Kind = "battery_low",
    mower_id: uuid.UUID = MOWER,
    params: dict[str, Any] | None = None,
) -> RuleEvent:
    """An event with dedupe key ``key`` occurring at ``seconds``."""
    return RuleEvent(
        kind=kind,
        mower_id=mower_id,
        account_id=ACCOUNT,
        severity=SEVERITY[kind],
        dedupe_key=key,
        message_key=kind,
        params={"battery": 18} if params is None else params,
        occurred_at=at(seconds),
    )


async def store_watches(
    stores: Stores,
    writes: list[tuple[MowerWatch, float | None]],
    events: list[RuleEvent] = (),  # type: ignore[assignment]
) -> None:
    """Lock, write and commit watches with their due seconds, and pending events."""
    async with stores.watches.watches() as tx:
        await tx.lock([w.mower_id for w, _ in writes] or [MOWER])
        await tx.write(
            [WatchWrite(w, None if due is None else at(due)) for w, due in writes], events
        )


async def queue(stores: Stores, *events: RuleEvent) -> None:
    """Pending events, written as a rules transaction writes them."""
    await store_watches(stores, [], list(events))


async def deliver(stores: Stores, ev: RuleEvent, users: list[str], limit: int = 200) -> list[str]:
    """Queue ``ev``, claim it and complete it for ``users``; the users with a new item."""
    await queue(stores, ev)
    [pending] = await stores.pending.claim_pending(at(10_000), 10, LEASE)
    items = await stores.pending.complete_pending(
        pending.id, pending.event, [InboxEntry(user_id=u) for u in users], limit
    )
    return sorted(i.user_id for i in items)


async def fan_out(stores: Stores, key: str, entries: list[InboxEntry], seconds: float = 0) -> None:
    """An event with ``key`` through the fan-out's call for ``entries``."""
    await queue(stores, event(key, seconds, params=PARAMS))
    [pending] = await stores.pending.claim_pending(at(10_000), 10, LEASE)
    await stores.pending.complete_pending(pending.id, pending.event, entries, 200)
