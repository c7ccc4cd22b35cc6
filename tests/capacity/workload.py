"""How a fleet behaves, and the message rates that follow (pure)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DAY", "Rates", "Workload", "rates"]

DAY = 86_400.0


@dataclass(frozen=True)
class Workload:
    """How a fleet behaves at its busiest hour, and over a day (for table sizes)."""

    heartbeat_s: float = 10.0  # an idle mower's periodic state (the figure)
    changes_per_s_mowing: float = 1.0  # a mowing mower's states (the figure)
    # Mowers mow in daylight: a mower that mows 4 h a day within a 10 h window has a
    # 40 % chance of mowing at any daytime moment; a fleet's schedules cluster in the
    # morning, so the busiest hour has about half of them out.
    mowing_share: float = 0.5
    mowing_hours_per_day: float = 4.0
    # Commands: a start, a dock and a pause or resume a day from the schedules (issued
    # as ordinary commands), plus about three from people (settings, manual starts).
    commands_per_mower_day: float = 6.0
    # Notifications: finished, battery low, stuck or offline: about three a mower a day
    # in the season; each reaches two people on average (owner and operator).
    notifications_per_mower_day: float = 3.0
    recipients_per_notification: float = 2.0
    # The busiest hour carries this many times the day's mean of commands and
    # notifications (schedules start together; jobs end together).
    peak_factor: float = 3.0
    # Live views: at the busiest hour one mower in twenty is watched, by two clients
    # on average (the console of an operator, a phone); every state of it is an event.
    watched_share: float = 0.05
    clients_per_watched: float = 2.0
    # Final and intermediate results per command (accepted, sent, executed): measured in
    # the soak as Fleet's statuses per command (``fleet_command_statuses``).
    results_per_command: float = 1.6
    # The consumers of every state: Telemetry, Notifications and Realtime.
    state_consumers: int = 3


@dataclass(frozen=True)
class Rates:
    """Messages per second at the busiest hour, and per day."""

    states_per_s: float
    commands_per_s: float
    results_per_s: float
    notifications_per_s: float
    realtime_events_per_s: float
    states_per_day: float
    commands_per_day: float
    notifications_per_day: float


def rates(mowers: int, w: Workload) -> Rates:
    """The fleet's rates."""
    idle = 1.0 / w.heartbeat_s
    per_mower = w.mowing_share * w.changes_per_s_mowing + (1 - w.mowing_share) * idle
    mowing_s = w.mowing_hours_per_day * 3600
    states_day = mowers * (mowing_s * w.changes_per_s_mowing + (DAY - mowing_s) * idle)
    commands_day = mowers * w.commands_per_mower_day
    notes_day = mowers * w.notifications_per_mower_day * w.recipients_per_notification
    states = mowers * per_mower
    commands = commands_day / DAY * w.peak_factor
    return Rates(
        states_per_s=states,
        commands_per_s=commands,
        results_per_s=commands * w.results_per_command,
        notifications_per_s=notes_day / DAY * w.peak_factor,
        realtime_events_per_s=states * w.watched_share * w.clients_per_watched,
        states_per_day=states_day,
        commands_per_day=commands_day,
        notifications_per_day=notes_day,
    )
