"""Per-mower strings the gateway would otherwise format for every message."""

from __future__ import annotations

import uuid

__all__ = ["MowerKeys"]


class MowerKeys:
    """A mower's controller key (its id as text), formatted once.

    ``str(uuid)`` costs about a microsecond, and every command and state needs the key
    at least once. Only the key is kept (about 130 bytes a mower); subjects are cheap
    enough to format per message and would triple that. Ids arriving from outside (a
    command for an unknown mower) must not grow the cache forever: past ``limit`` mowers
    keys are formatted without being kept.
    """

    def __init__(self, limit: int = 100_000) -> None:
        self._limit = limit
        self._keys: dict[uuid.UUID, str] = {}

    def key(self, mower_id: uuid.UUID) -> str:
        """The mower's controller key."""
        key = self._keys.get(mower_id)
        if key is None:
            key = str(mower_id)
            if len(self._keys) < self._limit:
                self._keys[mower_id] = key
        return key
