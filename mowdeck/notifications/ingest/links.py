"""Link events: ``mower.connected``/``disconnected`` in micro-batches, one transaction each.

The durable queue group ``notifications-links`` reads ``event.mower.*`` (other mower
events are acknowledged unread). A batch locks its mowers' watches FOR UPDATE, runs
``plan_links`` on them, writes, commits, and hands each changed watch to its actor.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from nats.aio.msg import Msg

from actors import ShardSupervisor
from contracts.v1 import ContractError, MowerLink, decode_event
from mowdeck.kit.consumer import DropMessage, RetryLater
from mowdeck.notifications.ingest.actor import Adopt
from mowdeck.notifications.ingest.plan import LinkEvent, mower_ids, plan_links
from mowdeck.notifications.ingest.ports import WatchStore
from mowdeck.notifications.ingest.states import count_plan, transact
from mowdeck.notifications.metrics import NotificationsMetrics
from mowdeck.notifications.rules.evaluate import Thresholds

__all__ = ["LINKS_DURABLE", "LinkEvents", "decode_link"]

LINKS_DURABLE = "notifications-links"

_LINKS = {"mower.connected": "connected", "mower.disconnected": "disconnected"}


def decode_link(msg: Msg) -> LinkEvent | None:
    """The link event of a message; None for another mower event."""
    if msg.subject.removeprefix("event.") not in _LINKS:
        return None
    try:
        event = decode_event(msg.data, subject=msg.subject)
    except ContractError as err:
        raise DropMessage(str(err)) from err
    if not isinstance(event.payload, MowerLink):
        return None
    link: Any = _LINKS[event.type]
    return LinkEvent(mower_id=event.payload.mower_id, link=link, at=event.occurred_at)


class LinkEvents:
    """The commit of the link consumer."""

    def __init__(
        self,
        store: WatchStore,
        *,
        supervisor: ShardSupervisor,
        thresholds: Thresholds,
        metrics: NotificationsMetrics,
        consuming_since: Callable[[], datetime | None],
        on_events: Callable[[], object],
    ) -> None:
        self._store = store
        self._supervisor = supervisor
        self._thresholds = thresholds
        self._metrics = metrics
        self._consuming_since = consuming_since
        self._on_events = on_events

    async def commit(
        self, items: list[LinkEvent | None]
    ) -> Mapping[int, DropMessage | RetryLater] | None:
        """Apply a batch of link events in one watch transaction."""
        links = [item for item in items if item is not None]
        if not links:
            return None
        since = self._consuming_since()
        plan = await transact(
            self._store,
            mower_ids(links),
            lambda stored: plan_links(stored, links, self._thresholds, since),
        )
        count_plan(self._metrics, plan, "links")
        adopted: dict[uuid.UUID, Any] = {w.watch.mower_id: w.watch for w in plan.writes}
        for mower_id, watch in adopted.items():
            ref = self._supervisor.get(str(mower_id))
            if ref is not None:
                ref.tell(Adopt(watch))
        if plan.events:
            self._on_events()
        return None
