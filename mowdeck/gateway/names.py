"""Per-mower strings the gateway would otherwise format for every message."""

from __future__ import annotations

import uuid

from contracts.v1.subjects import result_subject, telemetry_subject

__all__ = ["MowerNames"]


class MowerNames:
    """A mower's actor key and its result and telemetry subjects, formatted once.

    ``str(uuid)`` costs about a microsecond, and a command needs it several times. Ids
    arriving from outside (a command for an unknown mower) must not grow the cache
    forever: past ``limit`` mowers the names are formatted without being kept.
    """

    def __init__(self, limit: int = 100_000) -> None:
        self._limit = limit
        self._names: dict[uuid.UUID, tuple[str, str, str]] = {}

    def _get(self, mower_id: uuid.UUID) -> tuple[str, str, str]:
        names = self._names.get(mower_id)
        if names is None:
            names = (str(mower_id), result_subject(mower_id), telemetry_subject(mower_id))
            if len(self._names) < self._limit:
                self._names[mower_id] = names
        return names

    def key(self, mower_id: uuid.UUID) -> str:
        """The mower's controller key (its id as text)."""
        return self._get(mower_id)[0]

    def result_subject(self, mower_id: uuid.UUID) -> str:
        """``command.result.mower.<id>``."""
        return self._get(mower_id)[1]

    def telemetry_subject(self, mower_id: uuid.UUID) -> str:
        """``telemetry.mower.<id>``."""
        return self._get(mower_id)[2]
