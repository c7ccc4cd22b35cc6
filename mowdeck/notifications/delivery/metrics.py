"""The delivery worker's Prometheus metrics, on a registry the composition passes in."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["RESULTS", "DeliveryMetrics"]

# What a send comes to (``mowdeck_notifications_deliveries_total{result}``).
RESULTS = ("sent", "retry", "failed", "gone")

_SEND_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
# From when a notification was due to its send: 10 s is the objective (docs/operations.md,
# "Service level objectives").
_DELIVERY_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
_CLAIM_BUCKETS = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256)


class DeliveryMetrics:
    """Deliveries by channel and result, sends, latency, the backlog, gone targets, claims."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.deliveries = Counter(
            "mowdeck_notifications_deliveries_total",
            "Sends recorded, by channel and result (sent, retry, failed, gone)",
            ["channel", "result"],
            registry=registry,
        )
        self.attempts = Counter(
            "mowdeck_notifications_delivery_attempts_total",
            "Sends attempted, by channel",
            ["channel"],
            registry=registry,
        )
        self.send_seconds = Histogram(
            "mowdeck_notifications_send_duration_seconds",
            "Time of one send, by channel",
            ["channel"],
            registry=registry,
            buckets=_SEND_BUCKETS,
        )
        self.delivered_seconds = Histogram(
            "mowdeck_notifications_delivery_latency_seconds",
            "From when a notification was due (its event, or the end of quiet hours for a"
            " summary) to its successful send, by channel",
            ["channel"],
            registry=registry,
            buckets=_DELIVERY_BUCKETS,
        )
        self.due = Gauge(
            "mowdeck_notifications_deliveries_due",
            "Deliveries due now and not claimed",
            registry=registry,
        )
        self.oldest_due_age = Gauge(
            "mowdeck_notifications_oldest_due_delivery_age_seconds",
            "How long the oldest due delivery has been due (0 when none is)",
            registry=registry,
        )
        self.gone = Counter(
            "mowdeck_notifications_gone_targets_total",
            "Targets deleted because their channel said they no longer exist",
            ["channel"],
            registry=registry,
        )
        self.claims = Histogram(
            "mowdeck_notifications_delivery_claims_per_round",
            "Deliveries one claim round took",
            registry=registry,
            buckets=_CLAIM_BUCKETS,
        )
        self.pruned = Counter(
            "mowdeck_notifications_deliveries_pruned_total",
            "Finished deliveries deleted after the retention, by table",
            ["table"],
            registry=registry,
        )

    def channels(self, names: Iterable[str]) -> None:
        """Show every series of ``names`` at zero before its first send: a series born at 1
        would hide its first failure from ``rate()`` and ``increase()``."""
        for name in names:
            for result in RESULTS:
                self.deliveries.labels(name, result)
            self.attempts.labels(name)
            self.send_seconds.labels(name)
            self.delivered_seconds.labels(name)
            self.gone.labels(name)
