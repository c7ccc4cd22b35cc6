"""Notifications' Prometheus metrics on a registry passed in (``mowdeck_notifications_*``)."""

from __future__ import annotations

from typing import get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from actors import ActorMetrics
from mowdeck.kit.actor_batch import ActorBatchMetrics
from mowdeck.notifications.rules.events import SuppressReason

__all__ = ["NotificationsMetrics"]

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
# How long an alarm stays open or unacknowledged: a minute to a day.
_ALARM_BUCKETS = (60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0, 43200.0, 86400.0)


class NotificationsMetrics:
    """Counters and histograms of the rules, the offline scan and the fan-out."""

    def __init__(self, registry: CollectorRegistry) -> None:
        # The kit's own counts of the states (redeliveries, splits, unsettled deliveries).
        self.actor_batch = ActorBatchMetrics(registry, service="notifications")
        # The actor runtime's: actors, mailboxes, handling, failures, restarts, give-ups.
        self.actors = ActorMetrics(registry)
        p = "mowdeck_notifications_"
        self.states_evaluated = Counter(
            p + "states_evaluated", "States run through the rules.", registry=registry
        )
        self.states_ignored = Counter(
            p + "states_ignored",
            "States that changed nothing, by reason (not_newer, from_the_future).",
            ["reason"],
            registry=registry,
        )
        self.watches_written = Counter(
            p + "watches_written", "Watches written, by source.", ["source"], registry=registry
        )
        self.events = Counter(
            p + "events", "Events the rules decided, by kind.", ["kind"], registry=registry
        )
        self.suppressed = Counter(
            p + "suppressed",
            "Occurrences or recipients not notified, by reason.",
            ["reason"],
            registry=registry,
        )
        # At zero from the start, so that the first of each shows in rate(): the rules'
        # reasons (rules/events.py) and the fan-out's.
        for reason in (*get_args(SuppressReason), "not_subscribed", "not_viewable", "quiet_hours"):
            self.suppressed.labels(reason=reason)
        self.inbox_items = Counter(
            p + "inbox_items_written", "Inbox items stored.", registry=registry
        )
        self.commit_seconds = Histogram(
            p + "batch_commit_seconds",
            "Duration of a watch transaction, by source.",
            ["source"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.offline_scans = Counter(
            p + "offline_scans", "Rounds of the offline scan.", registry=registry
        )
        self.offline_claims = Counter(
            p + "offline_claims", "Watches the offline scan claimed.", registry=registry
        )
        self.fanout_failures = Counter(
            p + "fanout_failures", "Pending events whose fan-out failed.", registry=registry
        )
        self.fanout_discarded = Counter(
            p + "fanout_discarded",
            "Pending events dropped after too many failed claims.",
            registry=registry,
        )
        self.decisions_dropped = Counter(
            p + "decisions_dropped",
            "Times this replica dropped its cached can_view decisions (grants changed, a user"
            " disabled or deleted).",
            registry=registry,
        )
        self.alarm_changes = Counter(
            p + "alarm_changes",
            "Alarms raised, updated or cleared, by change and kind.",
            ["change", "kind"],
            registry=registry,
        )
        self.alarms_open = Gauge(
            p + "alarms_open",
            "Alarms not cleared (active or acknowledged), every account, by kind and severity;"
            " counted in the database every round of the alarm counter.",
            ["kind", "severity"],
            registry=registry,
        )
        self.alarm_clear_seconds = Histogram(
            p + "alarm_clear_seconds",
            "From an alarm's raising to its clearing, by kind.",
            ["kind"],
            buckets=_ALARM_BUCKETS,
            registry=registry,
        )
        self.alarm_acknowledge_seconds = Histogram(
            p + "alarm_acknowledge_seconds",
            "From an alarm's raising to its first acknowledgement, by kind.",
            ["kind"],
            buckets=_ALARM_BUCKETS,
            registry=registry,
        )
        self.alarms_escalated = Counter(
            p + "alarms_escalated",
            "Critical alarms told to the account's admins, unacknowledged in time.",
            registry=registry,
        )
        self.sent_published = Counter(
            p + "sent_published", "notifications.sent events published.", registry=registry
        )
