"""A connection's bounded send buffer: states conflated to the newest per mower.

The buffer keeps the order the hub dispatched in, so the id of whatever the client read
last is a position it can resume from without a gap: a newer state of a mower replaces
the waiting one and moves to the back (the client skips only states it would have seen
superseded). Commands, links and notifications are never dropped; when they cannot wait
any more (the buffer is full, or its oldest event has waited too long) the client is
closed as too far behind.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Hashable

from mowdeck.realtime.frames import Frame

__all__ = ["SendBuffer"]


class SendBuffer:
    """Frames waiting to be written to one client."""

    __slots__ = ("_items", "_keys", "_oldest_fixed", "conflated", "max_events", "max_lag")

    def __init__(self, *, max_events: int, max_lag: float) -> None:
        self.max_events = max_events
        self.max_lag = max_lag
        self._items: OrderedDict[Hashable, Frame] = OrderedDict()
        self._keys = itertools.count()
        self.conflated = 0  # states replaced by a newer one before they were written
        # When the oldest waiting frame that cannot be conflated was born (None: there is
        # none). A state may wait long without harm (a newer one replaces it), but a
        # command or a heartbeat waiting that long means the client is not reading.
        self._oldest_fixed: float | None = None

    def __len__(self) -> int:
        return len(self._items)

    def push(self, item: Frame, now: float) -> str | None:
        """Queue ``item``; the reason to close the client when it is too far behind."""
        items = self._items
        if item.conflatable and item.mower_id is not None:
            key: Hashable = item.mower_id
            if items.pop(key, None) is not None:
                self.conflated += 1
        else:
            key = next(self._keys)
            if self._oldest_fixed is None:
                self._oldest_fixed = item.born
        items[key] = item
        if len(items) > self.max_events:
            return "too-far-behind: the send buffer is full"
        oldest = self._oldest_fixed
        if oldest is not None and now - oldest > self.max_lag:
            return "too-far-behind: events waited longer than the lag allowed"
        return None

    def take(self, limit: int | None = None) -> list[Frame]:
        """Up to ``limit`` (default: all) waiting frames, oldest first.

        What is left keeps conflating: a writer that takes a bounded batch per write
        commits only that much to a slow transport.
        """
        items = self._items
        if limit is None or limit >= len(items):
            taken = list(items.values())
            items.clear()
            self._oldest_fixed = None
            return taken
        taken = [items.popitem(last=False)[1] for _ in range(limit)]
        self._oldest_fixed = next((f.born for f in items.values() if not f.conflatable), None)
        return taken

    def discard_mowers(self, mowers: set[object]) -> None:
        """Drop what waits about ``mowers`` (no longer visible to the client)."""
        for key, item in list(self._items.items()):
            if item.mower_id in mowers:
                del self._items[key]
        self._oldest_fixed = next((f.born for f in self._items.values() if not f.conflatable), None)
