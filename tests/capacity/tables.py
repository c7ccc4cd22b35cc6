"""PostgreSQL in the capacity model: rows and WAL per second, and sizes under retention (pure)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.capacity.model import Rates

__all__ = ["PER_MOWER", "RETENTION_DAYS", "table_load"]

# Days each growing table keeps (docs/telemetry.md, docs/fleet.md, docs/notifications.md);
# a table not named here holds one row per mower (or per user), whatever the time.
RETENTION_DAYS = {
    "mower_history": 30,
    "mower_positions": 90,
    "command_timeline": 30,
    "fleet_commands": 7,
    "fleet_command_statuses": 7,
    "fleet_audit_commands": 400,
    "fleet_audit_statuses": 400,
    "notification_deliveries": 7,
    "notification_alarms": 90,
}
PER_MOWER = ("mower_latest", "mower_directory", "notification_watches", "fleet_mowers")


def table_load(
    r: Rates, pg: dict[str, Any], mowers: int
) -> tuple[dict[str, float], float, dict[str, float]]:
    """Rows/s per table, WAL MB/s, and each table's GB under retention."""
    per_s = {"state": r.states_per_s, "command": r.commands_per_s,
             "notification": r.notifications_per_s}  # fmt: skip
    per_day = {"state": r.states_per_day, "command": r.commands_per_day,
               "notification": r.notifications_per_day}  # fmt: skip
    rows, wal, size = {}, 0.0, {}
    for name, t in pg["tables"].items():
        units = per_s[t["driver"]]
        if t["rows_per_unit"] > 0:
            rows[name] = units * t["rows_per_unit"]
        wal += units * t["wal_bytes_per_unit"]
        # Small tables' pages hold few rows: take the WAL of an insert as the row's size.
        inserted = t.get("inserted_per_unit", 0.0)
        row_bytes = t["bytes_per_live_row"]
        if (row_bytes > 4000 or row_bytes == 0) and inserted:
            row_bytes = t["wal_bytes_per_unit"] / inserted
        if name in RETENTION_DAYS:
            size[name] = per_day[t["driver"]] * inserted * RETENTION_DAYS[name] * row_bytes / 1e9
        elif name in PER_MOWER:
            size[name] = mowers * row_bytes / 1e9
    return rows, wal / 1e6, size
