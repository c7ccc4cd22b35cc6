"""``consuming_since``: the instant this replica last (re)started consuming states.

Time before it is the service's silence, not a mower's (docs/notifications.md, "The
silence timer, and restarts"). It is the start, and moves to the present whenever the
NATS connection is found down or found to have reconnected: the bus's client counts
its reconnects, so a given bus (the demo's, a test's) needs no callback of ours.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import structlog

__all__ = ["ConsumingSince"]

log = structlog.get_logger("mowdeck.notifications.ingest.consuming")


class ConsumingSince:
    """Tracks ``since`` from a NATS client's connection state and reconnect count."""

    def __init__(self, nc: Any, clock: Callable[[], datetime]) -> None:
        self._nc = nc
        self._clock = clock
        self.since = clock()
        self._reconnects = self._count()
        self._was_down = False

    def _count(self) -> int:
        stats = getattr(self._nc, "stats", None) or {}
        return int(stats.get("reconnects", 0))

    def consuming(self) -> bool:
        """Whether states can arrive now; moves ``since`` after an outage of the link."""
        if not self._nc.is_connected:
            self._was_down = True
            return False
        reconnects = self._count()
        if self._was_down or reconnects != self._reconnects:
            self.since = self._clock()
            log.info("consumption restarted", since=self.since.isoformat())
            self._was_down = False
            self._reconnects = reconnects
        return True
