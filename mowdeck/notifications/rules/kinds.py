"""The notification kinds, their severities and whether a user gets them by default."""

from __future__ import annotations

from typing import Literal

__all__ = ["DEFAULT_ENABLED", "KINDS", "SEVERITY", "Kind", "Severity"]

Kind = Literal[
    "job_started",
    "mowing_finished",
    "mower_stuck",
    "battery_low",
    "mower_offline",
    "mower_online",
    "alarm_escalated",
    "left_area",
    "theft_suspected",
]
KINDS: tuple[Kind, ...] = Kind.__args__  # type: ignore[attr-defined]

Severity = Literal["info", "warning", "critical"]

SEVERITY: dict[Kind, Severity] = {
    "job_started": "info",
    "mowing_finished": "info",
    "mower_stuck": "critical",
    "battery_low": "warning",
    "mower_offline": "warning",
    "mower_online": "info",
    "alarm_escalated": "critical",
    "left_area": "critical",
    "theft_suspected": "critical",
}
"""The severity of every event of a kind."""

DEFAULT_ENABLED: dict[Kind, bool] = {
    "job_started": False,
    "mowing_finished": True,
    "mower_stuck": True,
    "battery_low": True,
    "mower_offline": True,
    "mower_online": True,
    # Only an account's admins get it (inbox/fanout.py), when they have subscribed.
    "alarm_escalated": True,
    "left_area": True,
    "theft_suspected": True,
}
"""Whether a subscriber who never chose gets a kind: everything but ``job_started`` (ADR 0022)."""
