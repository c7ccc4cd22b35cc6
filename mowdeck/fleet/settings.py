"""Fleet's settings: the kit's basics plus command and events relay limits (``MOWDECK_*``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

import msgspec

from mowdeck.devices.endpoints import DEVELOPMENT_DEVICE_HOSTS, DeviceHosts
from mowdeck.kit.settings import BaseSettings, Formerly, SettingsError, load_settings

__all__ = ["FleetSettings", "load_fleet_settings"]

Seconds = Annotated[float, msgspec.Meta(gt=0, le=86_400)]
Days = Annotated[float, msgspec.Meta(gt=0, le=3650)]
# A rate limit's tokens a second (0: off) and the most it lets through at once.
Rate = Annotated[float, msgspec.Meta(ge=0, le=1_000_000)]
Burst = Annotated[int, msgspec.Meta(ge=1, le=10_000_000)]


class FleetSettings(BaseSettings, frozen=True, kw_only=True):
    """Fleet's settings; JWT (``AuthSettings``) and ``AuthzSettings`` are read beside them."""

    command_default_ttl_seconds: Seconds = 30.0
    command_max_ttl_seconds: Seconds = 300.0
    command_max_wait_seconds: Seconds = 60.0
    # The events relay (MOWDECK_FLEET_OUTBOX_* until this release: read for one more).
    fleet_events_relay_poll_seconds: Annotated[Seconds, Formerly("fleet_outbox_poll_seconds")] = 1.0
    fleet_events_relay_batch: Annotated[
        int, msgspec.Meta(ge=1, le=10_000), Formerly("fleet_outbox_batch")
    ] = 500
    # How long an authorization decision or a mower's owner is reused (0 = never).
    fleet_cache_seconds: Annotated[float, msgspec.Meta(ge=0, le=60)] = 1.0
    fleet_db_pool_size: Annotated[int, msgspec.Meta(ge=1, le=200)] = 10
    fleet_recorder_batch: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 500
    fleet_recorder_flush_seconds: Seconds = 0.05
    # Pruning: published events and command-log rows older than these go.
    fleet_events_relay_retention_days: Annotated[Days, Formerly("fleet_outbox_retention_days")] = (
        1.0
    )
    fleet_command_retention_days: Days = 7.0
    fleet_prune_interval_seconds: Seconds = 3600.0
    fleet_prune_batch_rows: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 5000
    # The audit trail (every command and status) is kept this long.
    fleet_audit_retention_days: Days = 400.0
    # A command without a final result by expires_at plus this is recorded failed
    # (outcome unknown); every replica looks for such commands every interval.
    fleet_command_result_grace_seconds: Seconds = 30.0
    fleet_finalize_interval_seconds: Seconds = 5.0
    # Rate limits on ordinary commands (an emergency stop is never limited): per user on
    # each replica, per account across replicas (docs/fleet.md, "Rate limits"). The
    # defaults let a script start 500 mowers at once; one token's 2,000 in 2 s mostly not.
    fleet_commands_per_user_rate: Rate = 20.0
    fleet_commands_per_user_burst: Burst = 600
    fleet_commands_per_account_rate: Rate = 50.0
    fleet_commands_per_account_burst: Burst = 2000
    # How long a command waits for the shared limit's store before this replica limits
    # the account on its own.
    fleet_rate_limit_store_timeout_seconds: Annotated[float, msgspec.Meta(gt=0, le=10)] = 0.25
    # The scheduler (docs/fleet.md, "Schedules"): every replica looks for due slots every
    # interval, takes up to a batch in one transaction, and publishes again what another
    # replica committed but left unpublished for longer than the republish lease.
    fleet_scheduler_interval_seconds: Annotated[float, msgspec.Meta(gt=0, le=60)] = 1.0
    fleet_scheduler_batch: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 1000
    fleet_scheduler_claim: Literal["skip_locked", "advisory"] = "skip_locked"
    fleet_scheduler_republish_seconds: Annotated[float, msgspec.Meta(gt=0, le=100)] = 10.0
    # A slot's start is claimed this long ahead and published at it (0: claimed at it).
    fleet_scheduler_lead_seconds: Annotated[float, msgspec.Meta(ge=0, le=60)] = 30.0
    # The gateways' device hosts (MOWDECK_GATEWAY_DEVICE_HOSTS, read by both): Fleet
    # refuses a connection URL the gateways would not dial.
    gateway_device_hosts: list[str] = msgspec.field(
        default_factory=lambda: list(DEVELOPMENT_DEVICE_HOSTS)
    )

    def __post_init__(self) -> None:
        try:
            DeviceHosts(self.gateway_device_hosts)
        except ValueError as err:
            raise SettingsError(f"MOWDECK_GATEWAY_DEVICE_HOSTS: {err}") from None
        if self.command_default_ttl_seconds > self.command_max_ttl_seconds:
            raise SettingsError(
                "MOWDECK_COMMAND_DEFAULT_TTL_SECONDS must not exceed "
                "MOWDECK_COMMAND_MAX_TTL_SECONDS"
            )


def load_fleet_settings(environ: Mapping[str, str] | None = None) -> FleetSettings:
    """``FleetSettings`` from ``MOWDECK_*`` variables."""
    return load_settings(FleetSettings, environ)
