"""Telemetry's Prometheus metrics on a registry passed in; names start ``mowdeck_telemetry_``."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from actors import ActorMetrics
from mowdeck.kit.actor_batch import ActorBatchMetrics

__all__ = ["TelemetryMetrics"]

_BATCH_BUCKETS = (1, 10, 50, 100, 250, 500, 1000, 2000, 5000)
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class TelemetryMetrics:
    """Counters and histograms of ingest and retention (requests: ``kit.http.request_metrics``)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        # The kit's own counts of the ingest (redeliveries, splits, unsettled deliveries).
        self.actor_batch = ActorBatchMetrics(registry, service="telemetry")
        # The actor runtime's: actors, mailboxes, handling, failures, restarts, give-ups.
        self.actors = ActorMetrics(registry)
        p = "mowdeck_telemetry_"
        self.states_received = Counter(
            p + "states_received", "States received from the bus.", registry=registry
        )
        self.rows_written = Counter(
            p + "rows_written", "Rows written, per table.", ["table"], registry=registry
        )
        self.heartbeats_skipped = Counter(
            p + "heartbeats_skipped",
            "Newer states with unchanged significant fields not written to history.",
            registry=registry,
        )
        self.foreign_subjects = Counter(
            p + "foreign_subjects",
            "Messages on TELEMETRY subjects other than telemetry.mower.<id>, acknowledged unread.",
            registry=registry,
        )
        self.dropped = Counter(
            p + "dropped", "Messages dropped, by reason.", ["reason"], registry=registry
        )
        self.batch_size = Histogram(
            p + "batch_size_states",
            "States per ingest batch.",
            buckets=_BATCH_BUCKETS,
            registry=registry,
        )
        self.commit_seconds = Histogram(
            p + "commit_seconds",
            "Duration of an ingest batch's transaction.",
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.retention_deleted = Counter(
            p + "retention_deleted_rows",
            "Rows deleted by retention, per table.",
            ["table"],
            registry=registry,
        )
        self.results_stored = Counter(
            p + "timeline_rows", "Command status transitions stored.", registry=registry
        )
