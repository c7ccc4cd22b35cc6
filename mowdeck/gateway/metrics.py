"""The gateway's Prometheus metrics, registered on a registry passed in."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from contracts.v1 import FINAL_STATUSES, MowerRegistration

__all__ = ["ACCOUNT_MIN_MOWERS", "GatewayMetrics", "accounts_mostly_offline"]

# An account counts in mowdeck_gateway_accounts_mostly_offline from this many mowers on a
# shard: one or two mowers offline are a mower's problem, not a site's network.
ACCOUNT_MIN_MOWERS = 3

# A stop's share in the gateway is a few milliseconds against a goal of 20 ms end to end:
# buckets of 1-2.5 ms up to 30 ms, so that its p99 reads to a millisecond or two.
_STOP_LATENCY = (
    0.00025,
    0.0005,
    0.001,
    0.002,
    0.003,
    0.004,
    0.005,
    0.0075,
    0.01,
    0.0125,
    0.015,
    0.0175,
    0.02,
    0.025,
    0.03,
    0.05,
    0.1,
    0.25,
    1,
)
_LATENCY = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.02,
    0.03,
    0.05,
    0.075,
    0.1,
    0.15,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
)


def accounts_mostly_offline(
    mowers: Mapping[uuid.UUID, MowerRegistration], connections: Mapping[uuid.UUID, Any]
) -> int:
    """Accounts with ``ACCOUNT_MIN_MOWERS`` or more of ``mowers`` of which at least half
    have no connection in ``connections`` or one not ``connected``."""
    known: dict[uuid.UUID, int] = {}
    offline: dict[uuid.UUID, int] = {}
    for mower_id, registration in mowers.items():
        account = registration.account_id
        known[account] = known.get(account, 0) + 1
        link = connections.get(mower_id)
        if link is None or not link.connected:
            offline[account] = offline.get(account, 0) + 1
    return sum(
        1
        for account, count in known.items()
        if count >= ACCOUNT_MIN_MOWERS and 2 * offline.get(account, 0) >= count
    )


class _Children:
    """A labelled counter's children by label value, cached: ``labels()`` is not free."""

    def __init__(self, counter: Counter) -> None:
        self._counter = counter
        self._children: dict[str, Any] = {}

    def __call__(self, value: str) -> Any:
        child = self._children.get(value)
        if child is None:
            child = self._children[value] = self._counter.labels(value)
        return child


class GatewayMetrics:
    """Counters, gauges and histograms of one gateway instance."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.admitted = Counter(
            "mowdeck_gateway_commands_admitted_total",
            "Commands admitted.",
            ["kind"],
            registry=registry,
        )
        self.refused = Counter(
            "mowdeck_gateway_commands_refused_total",
            "Commands not admitted, by reason (invalid, unknown_mower, account_mismatch,"
            " expired; error: admission failed and the delivery was given back).",
            ["reason"],
            registry=registry,
        )
        self.lane_ignored = Counter(
            "mowdeck_gateway_emergency_announcements_ignored_total",
            "Announcements on emergency.mower.* the lane did not act on, by reason (invalid:"
            " undecodable or naming another mower than its subject; not_a_stop; refused:"
            " unknown mower, another account, expired). Their stream copy, if any, is"
            " answered or terminated with the reason.",
            ["reason"],
            registry=registry,
        )
        for reason in ("invalid", "not_a_stop", "refused"):
            self.lane_ignored.labels(reason)
        self.foreign = Counter(
            "mowdeck_gateway_commands_foreign_total",
            "Commands of other shards acknowledged.",
            registry=registry,
        )
        self.results = Counter(
            "mowdeck_gateway_results_total",
            "Command results published.",
            ["status"],
            registry=registry,
        )
        self.command_seconds = Histogram(
            "mowdeck_gateway_command_seconds",
            "Admission to final result.",
            buckets=_LATENCY,
            registry=registry,
        )
        self.estop_seconds = Histogram(
            "mowdeck_gateway_emergency_stop_seconds",
            "Delivery of an emergency stop to its send to the device.",
            buckets=_STOP_LATENCY,
            registry=registry,
        )
        self.lane_realtime = Gauge(
            "mowdeck_gateway_emergency_lane_realtime",
            "1 when the emergency lane's thread runs SCHED_FIFO, 0 when ordinarily"
            " scheduled (the process may not raise it: see docs/gateway.md).",
            registry=registry,
        )
        self.connected = Gauge(
            "mowdeck_gateway_mowers_connected", "Mowers with a live link.", registry=registry
        )
        self.mowers_known = Gauge(
            "mowdeck_gateway_registry_mowers",
            "Mowers of this shard known from Fleet.",
            registry=registry,
        )
        self.registrations_refused = Counter(
            "mowdeck_gateway_registrations_refused_total",
            "Registrations skipped because no connection adapter takes their connection"
            " (unknown_kind, invalid: the adapter refused the options), its URL is not"
            " allowed (endpoint_not_allowed) or another mower of the shard holds its device"
            " endpoint (endpoint_taken).",
            ["reason"],
            registry=registry,
        )
        self.registrations_waiting = Gauge(
            "mowdeck_gateway_registrations_waiting",
            "Registrations refused as endpoint_taken, waiting for the endpoint to be freed.",
            registry=registry,
        )
        self.telemetry = Counter(
            "mowdeck_gateway_telemetry_published_total",
            "States published on a change.",
            registry=registry,
        )
        self.heartbeats = Counter(
            "mowdeck_gateway_heartbeats_published_total",
            "States republished as heartbeat.",
            registry=registry,
        )
        self.fleet_retries = Counter(
            "mowdeck_gateway_fleet_list_retries_total",
            "Unanswered fleet.mowers.list requests.",
            registry=registry,
        )
        self.redeliveries = Counter(
            "mowdeck_gateway_redeliveries_total",
            "Commands delivered more than once.",
            registry=registry,
        )
        self.duplicates = Counter(
            "mowdeck_gateway_commands_duplicate_total",
            "Deliveries of commands this shard had admitted already (acknowledged, no result).",
            registry=registry,
        )
        self.publish_failures = Counter(
            "mowdeck_gateway_publish_failures_total",
            "Publishes that failed and were retried.",
            ["what"],
            registry=registry,
        )
        self.in_flight = Gauge(
            "mowdeck_gateway_commands_in_flight",
            "Command deliveries held: admitted, final result not stored yet (bounded by"
            " MOWDECK_GATEWAY_MAX_IN_FLIGHT).",
            registry=registry,
        )
        self.waiting_in_stream = Gauge(
            "mowdeck_gateway_commands_waiting",
            "Commands waiting in the stream for this shard's consumer (its pending count).",
            registry=registry,
        )
        self.progress_acks = Counter(
            "mowdeck_gateway_progress_acks_total",
            "In-progress reports (+WPI) for held command deliveries.",
            registry=registry,
        )
        self.answered_before = Counter(
            "mowdeck_gateway_commands_answered_before_total",
            "Redeliveries whose final result an earlier process had stored (acknowledged,"
            " no new result).",
            registry=registry,
        )
        self.admission_wait = Histogram(
            "mowdeck_gateway_admission_wait_seconds",
            "Delivery of a command to its admission.",
            buckets=_LATENCY,
            registry=registry,
        )
        self.finished = Counter(
            "mowdeck_gateway_commands_finished_total",
            "Held command deliveries whose final result was stored, by whether that was"
            " before the command's expiry (before_expiry: true, false).",
            ["before_expiry"],
            registry=registry,
        )
        self.accounts_offline = Gauge(
            "mowdeck_gateway_accounts_mostly_offline",
            f"Accounts with at least {ACCOUNT_MIN_MOWERS} mowers on this shard of which at"
            " least half have no live link (read when scraped).",
            registry=registry,
        )
        # Every series of a fixed set of label values shown at zero from the start: a
        # series born at 1 would hide its first increase from rate() and increase().
        for reason in ("invalid", "unknown_mower", "account_mismatch", "expired", "error"):
            self.refused.labels(reason)
        for what in ("publish", "result", "event"):
            self.publish_failures.labels(what)
        for reason in ("unknown_kind", "invalid", "endpoint_not_allowed", "endpoint_taken"):
            self.registrations_refused.labels(reason)
        for status in ("accepted", *sorted(FINAL_STATUSES)):
            self.results.labels(status)
        for in_time in ("true", "false"):
            self.finished.labels(in_time)
        self.admitted_kind = _Children(self.admitted)
        self.result_status = _Children(self.results)
