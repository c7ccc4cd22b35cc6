"""Prometheus metrics of the actor runtime, on a registry passed in (nothing global)."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from actors._handling import HANDLING_BUCKETS, HandlingStats

__all__ = ["ActorMetrics", "Census"]


class Census(Protocol):
    """What the metrics read from a dispatcher when scraped."""

    def census(self) -> tuple[int, tuple[int, int]]:
        """Return (live actors, (normal, emergency) queued messages)."""
        ...

    def handling_stats(self) -> list[HandlingStats]:
        """Return the per-worker handling-time rows."""
        ...


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
        self._known: set[str] = set()

    def known(self, actor: str) -> None:
        """Show ``actor``'s failures, restarts and give-ups at zero from its first start: a
        series born at 1 would hide its first failure from ``rate()`` and ``increase()``."""
        if actor not in self._known:
            self._known.add(actor)
            for counter in (self.failures, self.restarts, self.give_ups):
                counter.labels(actor=actor)

    def attach(self, dispatcher: Census) -> None:
        """Report a running dispatcher's actors, mailboxes and handling times."""
        self._collector.attach(dispatcher)

    def detach(self, dispatcher: Census) -> None:
        """Stop reporting a dispatcher, keeping its handling-time counts (they only grow)."""
        self._collector.detach(dispatcher)


class _RuntimeCollector(Collector):
    """Reads the live figures from the dispatchers when scraped: no per-message cost."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dispatchers: list[Census] = []
        self._retired: dict[str, list[float]] = {}

    def attach(self, dispatcher: Census) -> None:
        with self._lock:
            self._dispatchers.append(dispatcher)

    def detach(self, dispatcher: Census) -> None:
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
