"""Identity events: users leaving, grants changing.

- ``identity.user.disabled`` and ``.deleted`` delete the user's preferences and inbox
  (``Erasure.delete_user``), once, through the durable queue group ``notifications-identity``.
- ``identity.grants.changed`` drops the cached ``can_view`` decisions: every replica has
  its own cache, so every replica hears it (``GrantsFeed``, an ordered consumer of its own).

Mower names and removals are ``names.py``'s.
"""

from __future__ import annotations

from typing import Any

import structlog
from nats.aio.msg import Msg
from nats.js import api

from contracts.v1 import ContractError, GrantsChanged, UserRef, decode_event
from contracts.v1.subjects import EVENTS
from mowdeck.authz import DecisionCache
from mowdeck.kit.bus import Bus
from mowdeck.kit.consumer import DropMessage, settle
from mowdeck.notifications.inbox.access import AccessCache
from mowdeck.notifications.inbox.ports import Erasure
from mowdeck.notifications.metrics import NotificationsMetrics

__all__ = ["GRANTS_SUBJECT", "IDENTITY_DURABLE", "IDENTITY_FILTER", "GrantsFeed", "IdentityEvents"]

IDENTITY_DURABLE = "notifications-identity"
IDENTITY_FILTER = "event.identity.user.*"
GRANTS_SUBJECT = "event.identity.grants.changed"

log = structlog.get_logger("mowdeck.notifications.inbox.identity")

_USER_GONE = frozenset({"identity.user.disabled", "identity.user.deleted"})


class IdentityEvents:
    """Handles ``event.identity.*`` (the consumer settles; ``grants`` is per replica)."""

    def __init__(
        self,
        erasure: Erasure,
        decisions: DecisionCache | AccessCache,
        metrics: NotificationsMetrics,
    ) -> None:
        self._erasure = erasure
        self._decisions = decisions
        self._metrics = metrics

    def _drop_decisions(self) -> None:
        self._decisions.forget()
        self._metrics.decisions_dropped.inc()

    async def handle(self, msg: Msg) -> None:
        """Delete a disabled or deleted user's data; anything else is acknowledged."""
        try:
            event = decode_event(msg.data, subject=msg.subject)
        except ContractError as err:
            raise DropMessage(str(err)) from err
        if event.type in _USER_GONE and isinstance(event.payload, UserRef):
            deleted = await self._erasure.delete_user(event.payload.user_id)
            # A user's rights went with them: what this replica cached about them is stale.
            self._drop_decisions()
            log.info(
                "user data deleted", type=event.type, user_id=event.payload.user_id, rows=deleted
            )

    async def on_message(self, msg: Msg) -> None:
        """The identity consumer's callback: ``handle``, then settle the message."""
        await settle(msg, self.handle, consumer=IDENTITY_DURABLE)

    async def on_grants(self, msg: Msg) -> None:
        """``identity.grants.changed``: drop the cached decisions."""
        try:
            event = decode_event(msg.data, subject=msg.subject)
        except ContractError as err:
            log.warning("identity event dropped", subject=msg.subject, reason=str(err))
            return
        if isinstance(event.payload, GrantsChanged):
            self._drop_decisions()


class GrantsFeed:
    """``identity.grants.changed`` to ``events.on_grants``, on this replica, from now on."""

    def __init__(self, bus: Bus, events: IdentityEvents) -> None:
        self._bus = bus
        self._events = events
        self._sub: Any = None

    async def start(self) -> None:
        """Subscribe (an ordered consumer: nothing durable, nothing to acknowledge)."""
        self._sub = await self._bus.js.subscribe(
            GRANTS_SUBJECT,
            stream=EVENTS.name,
            ordered_consumer=True,
            deliver_policy=api.DeliverPolicy.NEW,
            cb=self._events.on_grants,
        )

    async def stop(self) -> None:
        """Unsubscribe."""
        if self._sub is not None:
            await self._sub.unsubscribe()
            self._sub = None
