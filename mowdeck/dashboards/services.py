"""One dashboard per service: the gateway, Fleet, Telemetry, Notifications and Realtime."""

from __future__ import annotations

from mowdeck.dashboards._panels import Board, Query, quantile, rate

__all__ = ["fleet", "gateway", "notifications", "realtime", "telemetry"]


def _http(board: Board, service: str) -> None:
    board.row("HTTP")
    board.timeseries(
        "Requests per second by status",
        "Requests the service answered, by status code.",
        [Query(rate(f"mowdeck_{service}_http_requests_total", "status"), "{{status}}")],
        unit="reqps",
    )
    board.timeseries(
        "Request latency p99 by route",
        "The 99th percentile of the time to answer, by route.",
        [
            Query(
                quantile(0.99, f"mowdeck_{service}_http_request_duration_seconds", "route"),
                "{{route}}",
            )
        ],
        unit="s",
    )


def _consumers(board: Board, durable_prefix: str) -> None:
    board.timeseries(
        "Consumer lag",
        "Messages of each durable consumer not delivered yet, and delivered but not"
        " acknowledged yet.",
        [
            Query(
                "max by (consumer) (mowdeck_consumer_pending_messages"
                f'{{consumer=~"{durable_prefix}.*"}})',
                "{{consumer}} pending",
            ),
            Query(
                "max by (consumer) (mowdeck_consumer_ack_pending_messages"
                f'{{consumer=~"{durable_prefix}.*"}})',
                "{{consumer}} unacknowledged",
            ),
        ],
    )


def gateway() -> Board:
    """The gateway shards: window, waiting commands, latency, mowers, actors."""
    board = Board(
        "mowdeck-gateway",
        "Mowdeck: gateway",
        "The device gateway's shards: the in-flight window and the commands waiting for it,"
        " admission and command latency, emergency stops, mowers and registrations, and the"
        " controller actors.",
    )
    board.row("Commands")
    board.timeseries(
        "In-flight window and waiting commands",
        "Commands sent to devices and not answered yet, and commands waiting for room in the"
        " window, per shard.",
        [
            Query(
                "sum by (instance) (mowdeck_gateway_commands_in_flight)", "{{instance}} in flight"
            ),
            Query("sum by (instance) (mowdeck_gateway_commands_waiting)", "{{instance}} waiting"),
        ],
    )
    board.timeseries(
        "Admission wait",
        "From the bus delivering a command to its admission.",
        [
            Query(quantile(0.5, "mowdeck_gateway_admission_wait_seconds"), "p50"),
            Query(quantile(0.99, "mowdeck_gateway_admission_wait_seconds"), "p99"),
        ],
        unit="s",
    )
    board.timeseries(
        "Acceptance to final result",
        "From a command's admission to its final result.",
        [
            Query(quantile(0.5, "mowdeck_gateway_command_seconds"), "p50"),
            Query(quantile(0.99, "mowdeck_gateway_command_seconds"), "p99"),
        ],
        unit="s",
    )
    board.timeseries(
        "Emergency stop latency by shard",
        "From the bus delivering an emergency stop to its send, per shard; and whether the"
        " shard's emergency lane runs with real-time priority (1) or ordinarily (0).",
        [
            Query(
                quantile(0.99, "mowdeck_gateway_emergency_stop_seconds", "instance"),
                "{{instance}} p99",
            ),
            Query(
                "min by (instance) (mowdeck_gateway_emergency_lane_realtime)",
                "{{instance}} realtime lane",
            ),
        ],
        unit="s",
    )
    board.timeseries(
        "Commands admitted and results",
        "Commands admitted per second by kind, and results published by status.",
        [
            Query(rate("mowdeck_gateway_commands_admitted_total", "kind"), "admitted {{kind}}"),
            Query(rate("mowdeck_gateway_results_total", "status"), "result {{status}}"),
        ],
        unit="reqps",
    )
    board.timeseries(
        "Repeats",
        "Redeliveries of commands, duplicates of a command already held, commands answered"
        " before from the final outcomes, and commands of another shard's mowers.",
        [
            Query(rate("mowdeck_gateway_redeliveries_total"), "redelivered"),
            Query(rate("mowdeck_gateway_commands_duplicate_total"), "duplicate"),
            Query(rate("mowdeck_gateway_commands_answered_before_total"), "answered before"),
            Query(rate("mowdeck_gateway_commands_foreign_total"), "another shard's"),
        ],
        unit="reqps",
    )
    board.row("Mowers")
    board.timeseries(
        "Mowers connected and registered by shard",
        "Live device links against the registrations each shard holds.",
        [
            Query("sum by (instance) (mowdeck_gateway_mowers_connected)", "{{instance}} connected"),
            Query("sum by (instance) (mowdeck_gateway_registry_mowers)", "{{instance}} registered"),
        ],
    )
    board.timeseries(
        "Registrations waiting",
        "Registrations that name a device another mower of the shard holds.",
        [Query("sum by (instance) (mowdeck_gateway_registrations_waiting)", "{{instance}}")],
    )
    board.timeseries(
        "Published to the bus",
        "States and heartbeats the shards published per second.",
        [
            Query(rate("mowdeck_gateway_telemetry_published_total"), "states"),
            Query(rate("mowdeck_gateway_heartbeats_published_total"), "heartbeats"),
        ],
        unit="reqps",
    )
    _consumers(board, "device-gateway-")
    board.row("Actors and process")
    board.timeseries(
        "Mailboxes by lane",
        "Messages waiting in the controller actors' mailboxes, by lane.",
        [Query("sum by (lane) (mowdeck_actor_mailbox_messages)", "{{lane}}")],
    )
    board.timeseries(
        "Actor handling p99",
        "The 99th percentile of one message's handling, by actor type.",
        [
            Query(quantile(0.99, "mowdeck_actor_handling_seconds", "actor"), "{{actor}} p99"),
        ],
        unit="s",
    )
    board.timeseries(
        "Actor restarts and give-ups",
        "Actors restarted from their snapshot after a crash, and actors whose supervisor gave"
        " up restarting them, per second.",
        [
            Query(rate("mowdeck_actor_restarts_total"), "restarts"),
            Query(rate("mowdeck_actor_give_ups_total"), "give-ups"),
        ],
        unit="reqps",
    )
    return board


def fleet() -> Board:
    """Fleet: its API, the events relay, commands without results and rate limits."""
    board = Board(
        "mowdeck-fleet",
        "Mowdeck: Fleet",
        "The registry and command API: requests, the events relay's backlog, registry"
        " changes, commands no result came for, and the shard list the gateways ask for.",
    )
    _http(board, "fleet")
    board.row("Events and commands")
    board.timeseries(
        "Events relay backlog",
        "Events written and not yet published, and the age of the oldest of them.",
        [
            Query("max(mowdeck_fleet_events_relay_pending)", "pending"),
            Query("max(mowdeck_fleet_events_relay_lag_seconds)", "lag (s)"),
            Query("max(mowdeck_fleet_events_relay_set_aside)", "set aside"),
        ],
    )
    board.timeseries(
        "Events relayed",
        "Events published per second, and publish failures.",
        [
            Query(rate("mowdeck_fleet_events_relay_published_total"), "published"),
            Query(rate("mowdeck_fleet_events_relay_failures_total"), "failures"),
        ],
        unit="reqps",
    )
    board.timeseries(
        "Registry changes",
        "Mowers registered, updated and removed per second.",
        [Query(rate("mowdeck_fleet_registry_changes_total", "event"), "{{event}}")],
        unit="reqps",
    )
    board.timeseries(
        "Commands without a result",
        "Commands recorded failed because no result came by their expiry and grace: a"
        " gateway shard that went away with its commands.",
        [Query(rate("mowdeck_fleet_commands_unanswered_total"), "unanswered")],
        unit="reqps",
    )
    board.timeseries(
        "Shard lists served",
        "Answers to the gateways' fleet.mowers.list requests, by outcome.",
        [Query(rate("mowdeck_fleet_list_requests_total", "outcome"), "{{outcome}}")],
        unit="reqps",
    )
    board.timeseries(
        "Rate limit fallbacks",
        "Times a replica limited an account on its own because the shared limits' table"
        " failed or was slow.",
        [Query(rate("mowdeck_fleet_rate_limit_fallbacks_total"), "fallbacks")],
        unit="reqps",
    )
    _consumers(board, "fleet-")
    return board


def telemetry() -> Board:
    """Telemetry: ingest, batch sizes, write latency, drops and queries."""
    board = Board(
        "mowdeck-telemetry",
        "Mowdeck: Telemetry",
        "States in, batch sizes, the write latency of a batch, rows written by table, drops"
        " by reason, consumer lag and the query API.",
    )
    board.row("Ingest")
    board.timeseries(
        "States received and rows written",
        "States per second from the bus, and rows written per second by table.",
        [
            Query(rate("mowdeck_telemetry_states_received_total"), "states received"),
            Query(rate("mowdeck_telemetry_rows_written_total", "table"), "{{table}}"),
        ],
        unit="reqps",
    )
    board.timeseries(
        "Batch sizes",
        "States in one batch written in one transaction: median, 99th percentile and mean.",
        [
            Query(quantile(0.5, "mowdeck_telemetry_batch_size_states"), "p50"),
            Query(quantile(0.99, "mowdeck_telemetry_batch_size_states"), "p99"),
            Query(
                rate("mowdeck_telemetry_batch_size_states_sum")
                + " / "
                + rate("mowdeck_telemetry_batch_size_states_count"),
                "mean",
            ),
        ],
    )
    board.timeseries(
        "Write latency",
        "The duration of one batch's transaction.",
        [
            Query(quantile(0.5, "mowdeck_telemetry_commit_seconds"), "p50"),
            Query(quantile(0.99, "mowdeck_telemetry_commit_seconds"), "p99"),
        ],
        unit="s",
    )
    board.timeseries(
        "Skipped, dropped and split",
        "Heartbeats that changed nothing, states dropped by reason, and batches split because"
        " the store refused one of their states.",
        [
            Query(rate("mowdeck_telemetry_heartbeats_skipped_total"), "heartbeats skipped"),
            Query(rate("mowdeck_telemetry_dropped_total", "reason"), "dropped {{reason}}"),
            Query(rate("mowdeck_telemetry_actor_batch_splits_total"), "batches split"),
        ],
        unit="reqps",
    )
    board.timeseries(
        "Command timeline",
        "Command results written to the command timeline per second.",
        [Query(rate("mowdeck_telemetry_timeline_rows_total"), "rows")],
        unit="reqps",
    )
    _consumers(board, "telemetry-")
    _http(board, "telemetry")
    return board


def notifications() -> Board:
    """Notifications: rules, suppression, the delivery outbox and channels."""
    board = Board(
        "mowdeck-notifications",
        "Mowdeck: Notifications",
        "What the rules raise, why occurrences are held back, the delivery outbox's backlog"
        " and oldest due age, and deliveries by result per channel.",
    )
    board.row("Rules")
    board.timeseries(
        "Events raised by rule",
        "Occurrences the rules raised per second, by kind.",
        [Query(rate("mowdeck_notifications_events_total", "kind"), "{{kind}}")],
        unit="reqps",
    )
    board.timeseries(
        "Suppression reasons",
        "Occurrences or recipients not notified per second, by reason.",
        [Query(rate("mowdeck_notifications_suppressed_total", "reason"), "{{reason}}")],
        unit="reqps",
    )
    board.timeseries(
        "States evaluated and ignored",
        "States the watches evaluated per second, and those that changed nothing, by reason.",
        [
            Query(rate("mowdeck_notifications_states_evaluated_total"), "evaluated"),
            Query(
                rate("mowdeck_notifications_states_ignored_total", "reason"), "ignored {{reason}}"
            ),
        ],
        unit="reqps",
    )
    board.timeseries(
        "Watch transactions",
        "The 99th percentile of one watch transaction, by source.",
        [
            Query(
                quantile(0.99, "mowdeck_notifications_batch_commit_seconds", "source"), "{{source}}"
            )
        ],
        unit="s",
    )
    board.row("Delivery")
    board.timeseries(
        "Outbox backlog",
        "Deliveries due and not claimed.",
        [Query("max(mowdeck_notifications_deliveries_due)", "due")],
    )
    board.timeseries(
        "Oldest due delivery",
        "How long the oldest due delivery has been due (0 when none is).",
        [Query("max(mowdeck_notifications_oldest_due_delivery_age_seconds)", "age")],
        unit="s",
    )
    board.timeseries(
        "Deliveries by result per channel",
        "Sends recorded per second, by channel and result (sent, retry, failed, gone).",
        [
            Query(
                rate("mowdeck_notifications_deliveries_total", "channel, result"),
                "{{channel}} {{result}}",
            )
        ],
        unit="reqps",
    )
    board.timeseries(
        "Send duration p99 by channel",
        "The 99th percentile of one send, by channel.",
        [
            Query(
                quantile(0.99, "mowdeck_notifications_send_duration_seconds", "channel"),
                "{{channel}}",
            )
        ],
        unit="s",
    )
    board.timeseries(
        "Claims per round",
        "Deliveries one claim round took (mean).",
        [
            Query(
                rate("mowdeck_notifications_delivery_claims_per_round_sum")
                + " / "
                + rate("mowdeck_notifications_delivery_claims_per_round_count"),
                "mean",
            )
        ],
    )
    board.timeseries(
        "Inbox and fan-out",
        "Inbox items written per second, and fan-out failures.",
        [
            Query(rate("mowdeck_notifications_inbox_items_written_total"), "inbox items"),
            Query(rate("mowdeck_notifications_fanout_failures_total"), "fan-out failures"),
        ],
        unit="reqps",
    )
    _consumers(board, "notifications-")
    _http(board, "notifications")
    return board


def realtime() -> Board:
    """Realtime: connections, deliveries, conflations and resyncs."""
    board = Board(
        "mowdeck-realtime",
        "Mowdeck: Realtime",
        "Open streams by transport, events delivered and conflated, resumes and resyncs,"
        " closes, and the latency from the bus to a client.",
    )
    board.row("Streams")
    board.timeseries(
        "Connections by transport",
        "Open streams (SSE, WebSocket).",
        [Query("sum by (transport) (mowdeck_realtime_connections)", "{{transport}}")],
    )
    board.timeseries(
        "Events delivered and conflated",
        "Events written to clients per second, and states replaced by a newer one of the same"
        " mower before a slow client read them.",
        [
            Query(rate("mowdeck_realtime_events_delivered_total"), "delivered"),
            Query(rate("mowdeck_realtime_events_conflated_total"), "conflated"),
        ],
        unit="reqps",
    )
    board.timeseries(
        "Resumes and resyncs",
        "Streams resumed without a gap, and resumes answered with a resync and a snapshot,"
        " by reason.",
        [
            Query(rate("mowdeck_realtime_resumes_total"), "resumed"),
            Query(rate("mowdeck_realtime_resyncs_total", "reason"), "resync {{reason}}"),
        ],
        unit="reqps",
    )
    board.timeseries(
        "Closed by the server",
        "Streams closed per second by reason, and clients closed for staying too far behind.",
        [
            Query(rate("mowdeck_realtime_closes_total", "reason"), "{{reason}}"),
            Query(rate("mowdeck_realtime_slow_client_closes_total"), "slow clients"),
        ],
        unit="reqps",
    )
    board.timeseries(
        "Bus to client latency",
        "From the bus delivering an event to its write to a client.",
        [
            Query(quantile(0.5, "mowdeck_realtime_fanout_latency_seconds"), "p50"),
            Query(quantile(0.99, "mowdeck_realtime_fanout_latency_seconds"), "p99"),
        ],
        unit="s",
    )
    board.timeseries(
        "Bus messages received",
        "Messages the live subscriptions received per second, by stream.",
        [Query(rate("mowdeck_realtime_bus_messages_received_total", "stream"), "{{stream}}")],
        unit="reqps",
    )
    _http(board, "realtime")
    return board
