"""The overview: what an operator looks at first, every service on one page."""

from __future__ import annotations

from mowdeck.dashboards._panels import Board, Query, quantile, rate

__all__ = ["overview"]


def overview() -> Board:
    """Mowers, commands, emergency stops, notifications, ingest and dependencies."""
    board = Board(
        "mowdeck-overview",
        "Mowdeck: overview",
        "Mowers connected and reporting, commands and their outcomes, emergency stops,"
        " notifications, how far behind each consumer runs, and NATS and PostgreSQL as"
        " every service sees them. One dashboard per service has the details.",
    )
    board.row("Mowers")
    board.stat(
        "Mowers connected",
        "Mowers with a live link to their gateway shard, over every shard.",
        [Query("sum(mowdeck_gateway_mowers_connected)", "connected")],
    )
    board.stat(
        "Mowers known to the gateways",
        "Registrations the gateway shards hold (each mower on exactly one shard).",
        [Query("sum(mowdeck_gateway_registry_mowers)", "registered")],
    )
    board.stat(
        "States reported per second",
        "Mower states the gateways published to the bus.",
        [Query(rate("mowdeck_gateway_telemetry_published_total"), "states/s")],
        unit="reqps",
    )
    board.stat(
        "Accounts mostly offline",
        "Accounts with at least three mowers on a shard of which half or more have no link:"
        " a site's network, not one mower.",
        [Query("sum(mowdeck_gateway_accounts_mostly_offline)", "accounts")],
    )
    board.timeseries(
        "Mowers connected and reporting",
        "Connected against registered mowers, and the states Telemetry receives per second.",
        [
            Query("sum(mowdeck_gateway_mowers_connected)", "connected"),
            Query("sum(mowdeck_gateway_registry_mowers)", "registered"),
            Query(rate("mowdeck_telemetry_states_received_total"), "states received/s"),
        ],
        width=24,
    )
    board.row("Commands")
    board.timeseries(
        "Commands per second by kind",
        "Commands the gateway shards admitted, by kind.",
        [Query(rate("mowdeck_gateway_commands_admitted_total", "kind"), "{{kind}}")],
        unit="reqps",
    )
    board.timeseries(
        "Command outcomes per second",
        "Final and intermediate results the gateways published, by status.",
        [Query(rate("mowdeck_gateway_results_total", "status"), "{{status}}")],
        unit="reqps",
    )
    board.timeseries(
        "Emergency stop latency",
        "From the bus delivering an emergency stop to its send to the device. The objective:"
        " 50 ms at the 99th percentile.",
        [
            Query(quantile(0.5, "mowdeck_gateway_emergency_stop_seconds"), "p50"),
            Query(quantile(0.99, "mowdeck_gateway_emergency_stop_seconds"), "p99"),
        ],
        unit="s",
    )
    board.timeseries(
        "Commands finished before their expiry",
        "The share of held commands whose final result was stored before the command expired.",
        [
            Query(
                rate("mowdeck_gateway_commands_finished_total", selector='{before_expiry="true"}')
                + " / "
                + rate("mowdeck_gateway_commands_finished_total"),
                "finished in time",
            ),
        ],
        unit="percentunit",
    )
    board.row("Notifications")
    board.timeseries(
        "Notifications sent, held and failing",
        "Deliveries recorded per second by result (sent; retry and failed are failing; gone:"
        " the target no longer exists), and occurrences held back per second by reason.",
        [
            Query(rate("mowdeck_notifications_deliveries_total", "result"), "{{result}}"),
            Query(rate("mowdeck_notifications_suppressed_total", "reason"), "held: {{reason}}"),
        ],
        unit="reqps",
    )
    board.timeseries(
        "Delivery backlog",
        "Deliveries due and not claimed, and how long the oldest of them has been due.",
        [
            Query("max(mowdeck_notifications_deliveries_due)", "due"),
            Query("max(mowdeck_notifications_oldest_due_delivery_age_seconds)", "oldest due (s)"),
        ],
    )
    board.row("Ingest and dependencies")
    board.timeseries(
        "Ingest lag per consumer",
        "Messages in each durable consumer's stream not delivered to it yet.",
        [
            Query(
                "max by (stream, consumer) (mowdeck_consumer_pending_messages)",
                "{{stream}} {{consumer}}",
            )
        ],
    )
    board.timeseries(
        "NATS and PostgreSQL reachable",
        "1 while a service reaches the dependency, 0 when it does not; the lowest over each"
        " service's replicas.",
        [
            Query(
                "min by (job, dependency) (mowdeck_dependency_up)",
                "{{job}} {{dependency}}",
            )
        ],
    )
    board.timeseries(
        "Streams' fill",
        "Messages in each JetStream stream.",
        [Query("max by (stream) (mowdeck_stream_messages)", "{{stream}}")],
    )
    board.timeseries(
        "Garbage-collection pauses p99",
        "Every process's loop, and every actor of it, stands still during a collection.",
        [
            Query(
                quantile(0.99, "mowdeck_gc_pause_seconds", "job, generation"),
                "{{job}} gen {{generation}}",
            )
        ],
        unit="s",
    )
    board.timeseries(
        "Scrapes",
        "1 per target Prometheus scraped successfully, by job.",
        [Query("sum by (job) (up)", "{{job}}")],
    )
    return board
