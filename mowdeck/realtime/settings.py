"""Realtime settings: every ``MOWDECK_REALTIME_*`` variable and the CORS origins."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, ClassVar

import msgspec

from mowdeck.kit.client_address import TrustedProxies
from mowdeck.kit.settings import BaseSettings, SettingsError, load_settings

__all__ = ["RealtimeSettings", "load_realtime_settings"]

Positive = Annotated[float, msgspec.Meta(gt=0)]
Count = Annotated[int, msgspec.Meta(ge=1)]
# A rate limit's tokens a second (0: off) and the most it lets through at once.
Rate = Annotated[float, msgspec.Meta(ge=0, le=1_000_000)]
Burst = Annotated[int, msgspec.Meta(ge=1, le=10_000_000)]


class RealtimeSettings(BaseSettings, frozen=True, kw_only=True):
    """What the Realtime service reads from the environment."""

    retired: ClassVar[tuple[tuple[str, str], ...]] = (
        (
            "MOWDECK_REALTIME_TELEMETRY_URL",
            "Telemetry's API is no longer asked for the states of silent mowers; set "
            "MOWDECK_REALTIME_TELEMETRY_DATABASE=true to read them from its table "
            "(docs/realtime.md)",
        ),
    )

    # The visible mowers of every connection are asked again at least this often.
    realtime_authz_refresh_seconds: Positive = 30.0
    realtime_heartbeat_seconds: Positive = 15.0
    # Events a connection may have waiting (states conflated to one per mower count once);
    # beyond it the client is closed as too far behind.
    realtime_buffer_events: Count = 1000
    # A command, link or notification event waiting longer than this closes the client.
    realtime_max_lag_seconds: Positive = 30.0
    # Open streams per user on one replica.
    realtime_max_connections_per_user: Count = 10
    realtime_ticket_ttl_seconds: Positive = 30.0
    realtime_ticket_bucket: str = "realtime-tickets"
    # Read the latest states of mowers the TELEMETRY stream no longer holds from
    # Telemetry's mower_latest table in MOWDECK_DATABASE_URL (off: snapshots show what the
    # stream holds).
    realtime_telemetry_database: bool = False
    # A snapshot marks a state ``stale`` when it was observed longer ago than this.
    realtime_stale_after_seconds: Positive = 30.0
    # How long a resume may take to replay the streams before the client is resynced.
    realtime_replay_timeout_seconds: Positive = 10.0
    # How long the seed of mower accounts waits for one page of Fleet's fleet.mowers.list
    # (retried from 1 s doubling to 30 s until Fleet answers).
    realtime_seed_timeout_seconds: Positive = 5.0
    # Where the operator console served at ``/`` finds the APIs it calls, as a browser
    # reaches them (not the addresses services use among themselves). Empty Fleet or
    # Telemetry URL: the page's own origin (a proxy in front routes the paths); empty
    # Notifications URL: the console shows no inbox.
    realtime_console_fleet_url: str = ""
    realtime_console_telemetry_url: str = ""
    realtime_console_notifications_url: str = ""
    # The collector's young-generation threshold, set by ``mowdeck realtime`` for its
    # process (0 keeps Python's 700): at 700, with 20,000 deliveries a second, young
    # collections ran every few milliseconds and each promoted in-flight objects, so
    # full collections (hundreds of milliseconds with the loop stopped) came often.
    realtime_gc_young_threshold: Annotated[int, msgspec.Meta(ge=0)] = 50_000
    # Rate limits (docs/realtime.md, "Rate limits"): stream tickets per user, and sign-in
    # code exchanges per client address, on each replica.
    realtime_tickets_per_user_rate: Rate = 1.0
    realtime_tickets_per_user_burst: Burst = 30
    realtime_sign_ins_per_address_rate: Rate = 0.5
    realtime_sign_ins_per_address_burst: Burst = 20
    # Proxies (addresses or networks) whose X-Forwarded-For names the client of a sign-in;
    # empty: the header is never read, the peer is the client.
    realtime_trusted_proxies: list[str] = []

    def __post_init__(self) -> None:
        try:
            TrustedProxies(self.realtime_trusted_proxies)
        except ValueError as err:
            raise SettingsError(f"MOWDECK_REALTIME_TRUSTED_PROXIES: {err}") from None


def load_realtime_settings(environ: Mapping[str, str] | None = None) -> RealtimeSettings:
    """``RealtimeSettings`` from ``MOWDECK_*`` variables."""
    return load_settings(RealtimeSettings, environ)
