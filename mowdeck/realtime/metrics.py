"""Realtime's Prometheus metrics on a registry passed in; names start ``mowdeck_realtime_``."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["RealtimeMetrics"]

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)


class RealtimeMetrics:
    """Connections, deliveries, conflation, resumes and closes (requests: ``kit.http``)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        p = "mowdeck_realtime_"
        self.connections = Gauge(
            p + "connections", "Open streams, by transport.", ["transport"], registry=registry
        )
        self.delivered = Counter(
            p + "events_delivered", "Events written to clients.", registry=registry
        )
        self.conflated = Counter(
            p + "events_conflated",
            "States replaced by a newer state of the same mower before a slow client read them.",
            registry=registry,
        )
        self.received = Counter(
            p + "bus_messages_received",
            "Messages the live subscriptions received, by stream.",
            ["stream"],
            registry=registry,
        )
        self.resumes = Counter(
            p + "resumes", "Streams resumed from a position without a gap.", registry=registry
        )
        self.resyncs = Counter(
            p + "resyncs",
            "Resumes that could not be served from the streams (a resync and a snapshot).",
            ["reason"],
            registry=registry,
        )
        self.closes = Counter(
            p + "closes",
            "Streams closed by the server, by reason (slow, user, shutdown).",
            ["reason"],
            registry=registry,
        )
        # At zero from the start, so that the first of each shows in rate().
        for reason in ("unknown-position", "expired", "too-far-behind", "replay-timeout"):
            self.resyncs.labels(reason)
        for kind in ("slow", "user", "shutdown", "other"):
            self.closes.labels(kind)
        self.slow_closes = Counter(
            p + "slow_client_closes",
            "Clients closed because they stayed too far behind.",
            registry=registry,
        )
        self.refused = Counter(
            p + "connections_refused",
            "Streams refused, by reason (limit; blocked: a user on the deny-list).",
            ["reason"],
            registry=registry,
        )
        self.fanout = Histogram(
            p + "fanout_latency_seconds",
            "From the bus delivering an event to its write to a client (oldest of a write).",
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.refreshes = Counter(
            p + "authz_refreshes",
            "Visible-mower lookups after connect, by outcome.",
            ["outcome"],
            registry=registry,
        )
