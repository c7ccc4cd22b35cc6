"""Handling-time rows the dispatcher's workers write on the hot path, one set per worker.

They live with the dispatcher, their only writer, and stay plain Python: `ActorMetrics`
reads them when Prometheus scrapes.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Final

__all__ = ["HANDLING_BUCKETS", "HandlingStats"]

HANDLING_BUCKETS: Final[tuple[float, ...]] = (
    0.000_005,
    0.000_01,
    0.000_025,
    0.000_05,
    0.000_1,
    0.000_25,
    0.000_5,
    0.001,
    0.002_5,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    1.0,
)
_SLOTS: Final = len(HANDLING_BUCKETS) + 2  # one count per bucket, +Inf, then the sum


class HandlingStats:
    """Handling-time histogram rows of one worker thread, per actor class.

    `prometheus_client.Histogram.observe` takes a lock and walks the buckets in Python
    (about 2 µs); at 100k+ messages/s that is a large share of the budget. Each worker
    owns one of these instead (no lock: one writer) and the collector sums them when
    scraped. A scrape may see a row mid-update; the skew is one observation.
    """

    __slots__ = ("rows",)

    def __init__(self) -> None:
        self.rows: dict[str, list[float]] = {}

    def observe(self, actor: str, seconds: float) -> None:
        """Count one handled message of `actor` that took `seconds`."""
        row = self.rows.get(actor)
        if row is None:
            row = self.rows[actor] = [0.0] * _SLOTS
        row[bisect_left(HANDLING_BUCKETS, seconds)] += 1
        row[-1] += seconds

    def merge_into(self, rows: dict[str, list[float]]) -> None:
        """Add this worker's rows into `rows`."""
        for actor, row in dict(self.rows).items():  # dict() copies atomically under the GIL
            total = rows.setdefault(actor, [0.0] * _SLOTS)
            for i, value in enumerate(row):
                total[i] += value
