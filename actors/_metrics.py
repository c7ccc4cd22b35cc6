"""Prometheus metrics of the actor runtime, on a registry passed in (nothing global)."""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from actors._dispatcher import Dispatcher

__all__ = ["HANDLING_BUCKETS", "ActorMetrics", "HandlingStats"]

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


class ActorMetrics:
    """Actor gauge, mailbox depth per lane, handling time, slow handlers, restarts, give-ups."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.slow_handlers = Counter(
            "mowdeck_actor_slow_handlers_total",
            "Messages whose handler ran longer than the dispatcher's threshold.",
            ["actor"],
            registry=registry,
        )
        self.failures = Counter(
            "mowdeck_actor_failures_total",
            "Supervised actors that stopped on an unhandled exception.",
            ["actor"],
            registry=registry,
        )
        self.restarts = Counter(
            "mowdeck_actor_restarts_total",
            "Supervised actors restarted after a failure.",
            ["actor"],
            registry=registry,
        )
        self.give_ups = Counter(
            "mowdeck_actor_give_ups_total",
            "Supervised actors left stopped because they kept failing.",
            ["actor"],
            registry=registry,
        )
        self._collector = _RuntimeCollector()
        registry.register(self._collector)

    def attach(self, dispatcher: Dispatcher) -> None:
        """Report a running dispatcher's actors, mailboxes and handling times."""
        self._collector.attach(dispatcher)

    def detach(self, dispatcher: Dispatcher) -> None:
        """Stop reporting a dispatcher, keeping its handling-time counts (they only grow)."""
        self._collector.detach(dispatcher)


class _RuntimeCollector(Collector):
    """Reads the live figures from the dispatchers when scraped: no per-message cost."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dispatchers: list[Dispatcher] = []
        self._retired: dict[str, list[float]] = {}

    def attach(self, dispatcher: Dispatcher) -> None:
        with self._lock:
            self._dispatchers.append(dispatcher)

    def detach(self, dispatcher: Dispatcher) -> None:
        with self._lock:
            if dispatcher in self._dispatchers:
                self._dispatchers.remove(dispatcher)
                for stats in dispatcher.handling_stats():
                    stats.merge_into(self._retired)

    def describe(self) -> Iterable[Metric]:
        return self._families()

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            dispatchers = list(self._dispatchers)
            rows = {actor: list(row) for actor, row in self._retired.items()}
        actors = normal = emergency = 0
        for dispatcher in dispatchers:
            count, lanes = dispatcher.census()
            actors += count
            normal += lanes[0]
            emergency += lanes[1]
            for stats in dispatcher.handling_stats():
                stats.merge_into(rows)
        return self._families(actors, normal, emergency, rows)

    @staticmethod
    def _families(
        actors: int = 0,
        normal: int = 0,
        emergency: int = 0,
        rows: dict[str, list[float]] | None = None,
    ) -> list[Metric]:
        gauge = GaugeMetricFamily("mowdeck_actor_actors", "Live actors on the dispatchers.")
        gauge.add_metric([], actors)
        depth = GaugeMetricFamily(
            "mowdeck_actor_mailbox_messages", "Messages waiting in mailboxes.", labels=["lane"]
        )
        depth.add_metric(["normal"], normal)
        depth.add_metric(["emergency"], emergency)
        handling = HistogramMetricFamily(
            "mowdeck_actor_handling_seconds",
            "Time an actor spent handling one message.",
            labels=["actor"],
        )
        for actor, row in sorted((rows or {}).items()):
            cumulative = 0.0
            buckets: list[tuple[str, float]] = []
            for bound, count in zip((*HANDLING_BUCKETS, float("inf")), row, strict=False):
                cumulative += count
                buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
            handling.add_metric([actor], buckets, sum_value=row[-1])
        return [gauge, depth, handling]
