"""This shard's mowers: volatile, fed by Fleet's events and list (ADR 0013, ``kit/seed.py``)."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterator, Mapping

from contracts.v1 import MowerRegistration, shard_of

__all__ = ["Change", "ShardMowers"]


class Change(enum.Enum):
    """What applying a registration changed."""

    FOREIGN = "foreign"
    ADDED = "added"
    UNCHANGED = "unchanged"
    RENAMED = "renamed"
    RECONNECT = "reconnect"


class ShardMowers(Mapping[uuid.UUID, MowerRegistration]):
    """This shard's mowers by id; nothing here is persisted."""

    def __init__(self, shard_index: int, shard_count: int) -> None:
        self.shard_index = shard_index
        self.shard_count = shard_count
        self._mowers: dict[uuid.UUID, MowerRegistration] = {}

    def owns(self, mower_id: uuid.UUID) -> bool:
        """True when this shard owns ``mower_id``."""
        return shard_of(mower_id, self.shard_count) == self.shard_index

    def apply(self, registration: MowerRegistration) -> Change:
        """Add or update a registration (additive; a changed connection means reconnect)."""
        if not self.owns(registration.mower_id):
            return Change.FOREIGN
        current = self._mowers.get(registration.mower_id)
        self._mowers[registration.mower_id] = registration
        if current is None:
            return Change.ADDED
        if current.connection != registration.connection:
            return Change.RECONNECT
        if current != registration:
            return Change.RENAMED
        return Change.UNCHANGED

    def remove(self, mower_id: uuid.UUID) -> MowerRegistration | None:
        """Forget a mower; returns its registration if it was known."""
        return self._mowers.pop(mower_id, None)

    def __getitem__(self, mower_id: uuid.UUID) -> MowerRegistration:
        return self._mowers[mower_id]

    def __iter__(self) -> Iterator[uuid.UUID]:
        return iter(self._mowers)

    def __len__(self) -> int:
        return len(self._mowers)
