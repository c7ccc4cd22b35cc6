"""Notifications settings: every ``MOWDECK_NOTIFICATIONS_*`` variable with its default.

The rule thresholds are ADR 0022's defaults; ``thresholds`` hands them to the pure rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Annotated

import msgspec

from mowdeck.kit.settings import load_settings
from mowdeck.notifications.delivery.settings import DeliverySettings
from mowdeck.notifications.rules.evaluate import Thresholds
from mowdeck.notifications.rules.geofence import GeofenceThresholds

__all__ = ["NotificationsSettings", "load_notifications_settings"]

Seconds = Annotated[float, msgspec.Meta(gt=0, le=7 * 86400)]
Percent = Annotated[int, msgspec.Meta(ge=1, le=100)]
Count = Annotated[int, msgspec.Meta(ge=1, le=100_000)]
# A rate limit's tokens a second (0: off) and the most it lets through at once.
Rate = Annotated[float, msgspec.Meta(ge=0, le=1_000_000)]
Burst = Annotated[int, msgspec.Meta(ge=1, le=10_000_000)]


class NotificationsSettings(DeliverySettings, frozen=True, kw_only=True):
    """What the Notifications service reads from the environment (with the delivery's
    and the channels' settings, ``DeliverySettings`` and ``ChannelSettings``)."""

    # -- the rules (ADR 0022) ------------------------------------------------------
    # A job shorter than this ends without a mowing_finished.
    notifications_job_min_seconds: Seconds = 120.0
    # A mowing mower that moved less than the distance for this long is stuck.
    notifications_stuck_seconds: Seconds = 300.0
    notifications_stuck_distance_m: Annotated[float, msgspec.Meta(gt=0, le=100)] = 0.5
    # battery_low below the first level while not charging; armed again at the second.
    notifications_battery_low_percent: Percent = 20
    notifications_battery_rearm_percent: Percent = 30
    # No newer state for this long is offline; so is a disconnect not followed by a
    # reconnect within the grace.
    notifications_offline_after_seconds: Seconds = 120.0
    notifications_offline_grace_seconds: Seconds = 30.0
    # At most one notification per kind and mower within this time.
    notifications_cooldown_seconds: Annotated[float, msgspec.Meta(ge=0, le=86400)] = 300.0
    # A job that reaches the dock charging at or below this battery level is taken to be
    # recharging mid-job, not finished (docs/notifications.md, "Mid-job recharge").
    notifications_recharge_percent: Percent = 25
    # A recharging job whose mower stayed at the dock this long has finished after all.
    notifications_recharge_max_seconds: Seconds = 7200.0
    # A state observed further ahead of this service's clock is ignored: one from a clock
    # years ahead would leave every later state of its mower "not newer".
    notifications_max_clock_skew_seconds: Seconds = 300.0
    # -- geofences (docs/notifications.md, "Geofences") -------------------------------
    # left_area: outside every work area of its site, or inside a stay-out zone, for
    # longer than this and farther than the distance.
    notifications_geofence_seconds: Seconds = 30.0
    notifications_geofence_metres: Annotated[float, msgspec.Meta(ge=0, le=10_000)] = 5.0
    # theft_suspected: while not mowing, faster than this (a mower drives at most 1.5 m/s)
    # over at least the distance.
    notifications_theft_speed_mps: Annotated[float, msgspec.Meta(gt=0, le=100)] = 3.0
    notifications_theft_distance_m: Annotated[float, msgspec.Meta(gt=0, le=10_000)] = 20.0
    # How long the start waits for one page of fleet.sites.areas.
    notifications_sites_timeout_seconds: Seconds = 2.0
    # -- the inbox ------------------------------------------------------------------
    # Newest items kept per user.
    notifications_inbox_limit: Count = 200
    # -- alarms (docs/notifications.md, "Alarms") --------------------------------------
    # Cleared alarms are kept this long; the alarm round prunes them and counts the open
    # ones (mowdeck_notifications_alarms_open) every interval.
    notifications_alarm_retention_days: Annotated[int, msgspec.Meta(ge=1, le=3650)] = 90
    notifications_alarm_round_seconds: Seconds = 30.0
    # The alarms' audit trail (who acknowledged, assigned; what was raised and cleared) is
    # kept this long, as Fleet keeps its trail of commands.
    notifications_alarm_audit_retention_days: Annotated[int, msgspec.Meta(ge=1, le=3650)] = 400
    # A critical alarm nobody acknowledged this long after it was raised is told to the
    # account's admins, once (alarms/escalation.py); 0 turns escalation off.
    notifications_escalate_after_seconds: Annotated[float, msgspec.Meta(ge=0, le=7 * 86400)] = 0.0
    # -- loops and batches ------------------------------------------------------------
    # Period of the offline scan (the silence timer) and the watches it takes per round.
    notifications_offline_scan_seconds: Seconds = 5.0
    notifications_offline_scan_batch: Count = 500
    # State micro-batches: at most this many states, waiting at most the linger. Larger
    # batches share a batch's fixed costs (two statements, one actor start and snapshot
    # query for the new mowers, the loop's turns): 2,000 took 1.3x the states per second
    # of 500 from a backlog (docs/performance.md, "Notifications"), 5,000 and 10,000 no
    # more than 2,000 while locking more watches per transaction.
    notifications_state_batch_max: Count = 2000
    notifications_state_batch_linger_ms: Annotated[float, msgspec.Meta(ge=0, le=10_000)] = 20.0
    # Pending events the fan-out claims per round, the lease of a claim, and the claims
    # after which an event that keeps failing its fan-out is dropped.
    notifications_fanout_batch: Count = 50
    notifications_fanout_lease_seconds: Seconds = 60.0
    notifications_fanout_max_attempts: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 8
    # How often the fan-out looks for events other replicas' rules decided (this replica's
    # own wake it at once).
    notifications_fanout_poll_seconds: Seconds = 1.0
    # Worker threads the per-mower watch actors share.
    notifications_actor_workers: Annotated[int, msgspec.Meta(ge=1, le=64)] = 2
    # How long the Fleet seed waits for one page of fleet.mowers.list.
    notifications_seed_timeout_seconds: Seconds = 2.0
    # How long a can_view decision is cached (identity.grants.changed drops the cache).
    notifications_decision_cache_seconds: Annotated[float, msgspec.Meta(ge=0, le=3600)] = 60.0
    notifications_db_pool_size: Annotated[int, msgspec.Meta(ge=1, le=100)] = 8
    # The young-generation threshold of the garbage collector, set by `mowdeck
    # notifications` for its process (0 keeps Python's 700). A state batch allocates a
    # dozen objects per state that die with the batch; at 700 the collector ran every
    # few dozen states and walked the long-lived watches and actors again and again
    # (docs/performance.md, "Notifications").
    notifications_gc_young_threshold: Annotated[int, msgspec.Meta(ge=0)] = 100_000
    # New channel targets per user (each replica): tokens a second (0: off) and the most at
    # once (docs/notifications.md, "Rate limits").
    notifications_targets_per_user_rate: Rate = 0.1
    notifications_targets_per_user_burst: Burst = 20

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.notifications_battery_rearm_percent <= self.notifications_battery_low_percent:
            raise ValueError(
                "MOWDECK_NOTIFICATIONS_BATTERY_REARM_PERCENT must be above"
                " MOWDECK_NOTIFICATIONS_BATTERY_LOW_PERCENT (the hysteresis needs a gap)"
            )

    @property
    def thresholds(self) -> Thresholds:
        """The rule parameters of these settings."""
        return Thresholds(
            job_min=timedelta(seconds=self.notifications_job_min_seconds),
            stuck=timedelta(seconds=self.notifications_stuck_seconds),
            stuck_distance_m=self.notifications_stuck_distance_m,
            battery_low_percent=self.notifications_battery_low_percent,
            battery_rearm_percent=self.notifications_battery_rearm_percent,
            offline_after=timedelta(seconds=self.notifications_offline_after_seconds),
            offline_grace=timedelta(seconds=self.notifications_offline_grace_seconds),
            cooldown=timedelta(seconds=self.notifications_cooldown_seconds),
            recharge_percent=self.notifications_recharge_percent,
            recharge_max=timedelta(seconds=self.notifications_recharge_max_seconds),
            max_clock_skew=timedelta(seconds=self.notifications_max_clock_skew_seconds),
            geofence=GeofenceThresholds(
                geofence=timedelta(seconds=self.notifications_geofence_seconds),
                geofence_m=self.notifications_geofence_metres,
                theft_speed_mps=self.notifications_theft_speed_mps,
                theft_distance_m=self.notifications_theft_distance_m,
            ),
        )

    @property
    def fanout_lease(self) -> timedelta:
        """``notifications_fanout_lease_seconds`` as a timedelta."""
        return timedelta(seconds=self.notifications_fanout_lease_seconds)

    @property
    def decision_cache_ttl(self) -> timedelta:
        """``notifications_decision_cache_seconds`` as a timedelta."""
        return timedelta(seconds=self.notifications_decision_cache_seconds)


def load_notifications_settings(
    environ: Mapping[str, str] | None = None,
) -> NotificationsSettings:
    """``NotificationsSettings`` from ``MOWDECK_*`` variables."""
    return load_settings(NotificationsSettings, environ)
