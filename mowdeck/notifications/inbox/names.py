"""The Fleet name cache: mower names and accounts by id, on every replica.

Names for the templates and the accounts the API checks selections against come from
the Fleet seed (``fleet.mowers.list``) and the ``mower.*`` events; ``mower.removed``
forgets the mower (``Erasure.forget_mower``, idempotent) and stops its actor.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

import structlog

from contracts.v1 import MowerRegistration
from mowdeck.notifications.inbox.ports import Erasure

__all__ = ["MowerNames"]

log = structlog.get_logger("mowdeck.notifications.inbox.names")


class MowerNames:
    """Mower names and accounts by id, from the Fleet seed and the mower events; removal
    forgets."""

    def __init__(
        self,
        erasure: Erasure,
        on_removed: Callable[[uuid.UUID], Awaitable[object]],
        on_applied: Callable[[MowerRegistration], object] = lambda _: None,
    ) -> None:
        """``on_applied`` hears of every registration applied (the geofences' sites)."""
        self._erasure = erasure
        self._on_removed = on_removed
        self._on_applied = on_applied
        self._mowers: dict[uuid.UUID, MowerRegistration] = {}

    def get(self, mower_id: uuid.UUID) -> str | None:
        """The mower's name, if known."""
        registration = self._mowers.get(mower_id)
        return None if registration is None else registration.name

    def account(self, mower_id: uuid.UUID) -> uuid.UUID | None:
        """The mower's account, if known (the HTTP API's ``mower_account``)."""
        registration = self._mowers.get(mower_id)
        return None if registration is None else registration.account_id

    async def apply(self, registration: MowerRegistration) -> None:
        """A registered or updated mower (or one of the seed's list)."""
        self._mowers[registration.mower_id] = registration
        self._on_applied(registration)

    async def remove(self, mower_id: uuid.UUID) -> None:
        """A removed mower: forget it, its watch, pending events and inbox items."""
        self._mowers.pop(mower_id, None)
        await self._on_removed(mower_id)
        rows = await self._erasure.forget_mower(mower_id)
        log.info("mower forgotten", mower_id=str(mower_id), rows=rows)
