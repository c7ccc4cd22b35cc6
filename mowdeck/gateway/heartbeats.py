"""The heartbeat: every mower's latest state published again, every interval (ADR 0013)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable

from mowdeck.gateway.actor import Heartbeat
from mowdeck.kit.periodic import Periodic

__all__ = ["heartbeats"]


def heartbeats(
    mowers: Iterable[uuid.UUID], tell: Callable[[uuid.UUID, object], None], interval: float
) -> Periodic:
    """A timer that tells each of ``mowers`` a ``Heartbeat`` every ``interval`` seconds."""

    def beat() -> None:
        message = Heartbeat()
        for mower_id in list(mowers):
            tell(mower_id, message)

    return Periodic("heartbeats", interval, beat)
