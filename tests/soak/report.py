"""The soak's report: what each process used at both ends, what grew, and why it may."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.soak.growth import GATED, Growth

__all__ = ["RETAINED", "render", "unbounded"]

# What grows by design until its retention cuts it: every stream (max age, bytes or
# messages per subject; `contracts/v1` limits), the time series and logs Telemetry, Fleet
# and Notifications keep for a stated number of days (docs/telemetry.md, docs/fleet.md,
# docs/notifications.md). CPU time is a counter.
RETAINED_PREFIXES = ("stream.",)
RETAINED: dict[str, str] = {
    "mower_history": "MOWDECK_TELEMETRY_RETENTION_HISTORY_DAYS (30)",
    "mower_positions": "MOWDECK_TELEMETRY_RETENTION_POSITIONS_DAYS (90)",
    "command_timeline": "MOWDECK_TELEMETRY_RETENTION_TIMELINE_DAYS (30)",
    "fleet_commands": "MOWDECK_FLEET_COMMAND_RETENTION_DAYS (7)",
    "fleet_command_statuses": "MOWDECK_FLEET_COMMAND_RETENTION_DAYS (7)",
    "fleet_open_commands": "the commands in flight (each ends by its ttl)",
    "fleet_audit_commands": "MOWDECK_FLEET_AUDIT_RETENTION_DAYS (400)",
    "fleet_audit_statuses": "MOWDECK_FLEET_AUDIT_RETENTION_DAYS (400)",
    "fleet_outbox": "MOWDECK_FLEET_EVENTS_RELAY_RETENTION_DAYS (1)",
    "notification_inbox": "MOWDECK_NOTIFICATIONS_INBOX_LIMIT (200 per user)",
    "notification_deliveries": "finished deliveries pruned after 7 days",
    "notification_pending": "deliveries waiting (each ends delivered or given up)",
    "notification_alarms": "MOWDECK_NOTIFICATIONS_ALARM_RETENTION_DAYS (90, cleared)",
    "notification_alarm_audit": "MOWDECK_NOTIFICATIONS_ALARM_AUDIT_RETENTION_DAYS (400)",
}


# Measures that grow up to a configured bound, not with time.
BOUNDED: dict[str, str] = {
    "nats-server.rss_mb": "the streams' caches: follows the streams, bounded by their limits",
    "postgres.rss_mb": "each backend's touched share of shared_buffers, counted in every backend",
    "postgres.processes": "the pools' connections (each pool's max_size) and autovacuum's workers",
    "postgres.threads": "one a backend: as postgres.processes",
    "postgres.open_files": (
        "each backend keeps open the files of the relations its queries touched (up to"
        " max_files_per_process): at most postgres.processes x postgres.relation_files;"
        " a pool connection meets a rare query (a retention round) late"
    ),
    "simulator.remembered_commands": (
        "the simulated mowers' memory of the command ids they were sent (at most 4,096 a"
        " mower, simulator/model.py): the test's devices, in the services' process"
    ),
    "table.notification_watches.bytes": "updated rows' old versions until autovacuum",
    "table.mower_latest.bytes": "updated rows' old versions until autovacuum",
    "table.fleet_rate_limits.bytes": "updated rows' old versions until autovacuum",
}


def _retained(name: str) -> bool:
    if name.startswith(RETAINED_PREFIXES) or name.endswith(".cpu_s") or name in BOUNDED:
        return True
    parts = name.split(".")
    return parts[0] == "table" and parts[1] in RETAINED


def unbounded(found: Mapping[str, Growth], limit_pct: float = 10.0) -> list[Growth]:
    """What grew more than ``limit_pct`` after the warm-up and no retention bounds; a
    gated measure within its bound (its slack: a few threads a runtime starts) is not."""
    return [
        g
        for g in found.values()
        if not _retained(g.name)
        and g.percent > limit_pct
        and g.end - g.start > 1
        and not (g.name in GATED and GATED[g.name].allows(g.start, g.end))
    ]


def _row(g: Growth) -> str:
    pct = "n/a" if g.percent == float("inf") else f"{g.percent:+.1f} %"
    return f"| {g.name} | {g.start:,.1f} | {g.end:,.1f} | {pct} |"


def render(
    meta: Mapping[str, Any], found: Mapping[str, Growth], problems: list[str], grew: list[Growth]
) -> str:
    """The report as Markdown."""
    lines = [
        "# Soak report",
        "",
        *(f"- {k}: {v}" for k, v in meta.items()),
        "",
        "## Processes (after the warm-up, first and last samples' medians)",
        "",
        "| measure | start | end | growth |",
        "|---|---|---|---|",
        *(_row(g) for n, g in sorted(found.items()) if not n.startswith(("stream.", "table."))),
        "",
        "## Streams and tables (bounded by retention where named in `RETAINED`)",
        "",
        "| measure | start | end | growth |",
        "|---|---|---|---|",
        *(_row(g) for n, g in sorted(found.items()) if n.startswith(("stream.", "table."))),
        "",
        "## Retention of what may grow",
        "",
        "Every stream: its limits in `contracts/v1` (max age, bytes, messages per subject).",
        *(f"- {table}: {bound}" for table, bound in RETAINED.items()),
        *(f"- {name}: {bound}" for name, bound in BOUNDED.items()),
        "",
        "## Verdict",
        "",
        f"- gated ({', '.join(GATED)}): " + ("; ".join(problems) if problems else "within bounds"),
        "- grew more than 10 % without a retention bound: "
        + (", ".join(f"{g.name} {g.percent:+.1f} %" for g in grew) if grew else "nothing"),
        "",
    ]
    return "\n".join(lines)
