"""Housekeeping on a timer: every replica tries a round, the one holding the lock deletes.

The round itself is the service's (cutoffs from its settings, a ``LockedRound`` in its
adapter); this is what every such round shares: the timer, the log lines, and the rows
deleted per table counted on a metric.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog
from prometheus_client import Counter

from mowdeck.kit.periodic import Periodic

__all__ = ["Housekeeping"]

DeleteRound = Callable[[], Awaitable[dict[str, int] | None]]


class Housekeeping:
    """Runs ``round_()`` every ``interval`` seconds; ``run_once`` is the unit tests drive.

    ``round_`` returns rows deleted per table, or None when another replica held the lock;
    ``deleted`` is a counter with a ``table`` label.
    """

    def __init__(
        self, name: str, interval: float, round_: DeleteRound, deleted: Counter, *, what: str
    ) -> None:
        self._round = round_
        self._deleted = deleted
        self._what = what
        self._log = structlog.get_logger(f"mowdeck.{name}")
        self._timer = Periodic(name, interval, self.run_once)

    async def run_once(self) -> dict[str, int] | None:
        """One round; rows deleted per table, or None if another replica ran it."""
        deleted = await self._round()
        if deleted is None:
            self._log.info(f"{self._what} skipped: another replica holds the lock")
            return None
        for table, count in deleted.items():
            self._deleted.labels(table=table).inc(count)
        self._log.info(f"{self._what} round done", **deleted)
        return deleted

    def start(self) -> None:
        """Run a round every interval (the first after one interval)."""
        self._timer.start()

    async def stop(self) -> None:
        """Stop the timer (a round in progress is cancelled; its batches are committed)."""
        await self._timer.stop()
