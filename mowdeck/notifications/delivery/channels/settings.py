"""The channel layer's settings: ``MOWDECK_NOTIFICATIONS_*`` for targets, VAPID and sending.

``ChannelSettings`` extends ``BaseSettings`` so the service's settings can extend it in
turn and read everything with one ``load_settings``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

import msgspec

from mowdeck.kit.settings import BaseSettings, load_settings

__all__ = ["DEFAULT_NTFY_SERVERS", "DEFAULT_PUSH_HOSTS", "ChannelSettings", "load_channel_settings"]

# The hosts the browsers' push services send from (checked against their subscriptions):
# Chrome/Edge-Chromium: fcm.googleapis.com; Firefox: updates.push.services.mozilla.com
# (and other names under push.services.mozilla.com); Safari: web.push.apple.com (and
# other names under push.apple.com); Edge/Windows: <region>.notify.windows.com.
DEFAULT_PUSH_HOSTS = (
    "fcm.googleapis.com",
    "updates.push.services.mozilla.com",
    "*.push.services.mozilla.com",
    "web.push.apple.com",
    "*.push.apple.com",
    "*.notify.windows.com",
)
DEFAULT_NTFY_SERVERS = ("https://ntfy.sh",)


class ChannelSettings(BaseSettings, frozen=True, kw_only=True):
    """Where targets may point, the VAPID identity and how long a send may take."""

    # Web Push endpoints must be HTTPS on one of these: ``host`` (any port), ``host:port``
    # (that port only) or ``*.suffix`` (any name below the suffix, not the suffix itself).
    notifications_push_hosts: list[str] = msgspec.field(
        default_factory=lambda: list(DEFAULT_PUSH_HOSTS)
    )
    # ntfy servers targets may name, as base URLs (compared normalised).
    notifications_ntfy_servers: list[str] = msgspec.field(
        default_factory=lambda: list(DEFAULT_NTFY_SERVERS)
    )
    # Development and tests only: hosts (same patterns) that may use http:// and may be
    # private, loopback or link-local addresses. Empty in production.
    notifications_insecure_hosts: list[str] = msgspec.field(default_factory=list)
    # The channels the service starts (entry points of mowdeck.notification_channels).
    # ``log`` (development, the demo) also lets users register log targets: leave it out
    # in production.
    notifications_channels: list[str] = msgspec.field(default_factory=lambda: ["webpush", "ntfy"])
    # VAPID: the private key as raw base64url (32 bytes) or base64url DER, not PEM text;
    # or a PEM file (a secret mount); or, in development, a key file created on first start.
    notifications_vapid_private_key: str | None = None
    notifications_vapid_private_key_file: str | None = None
    notifications_vapid_key_file: str | None = None
    # The VAPID ``sub``: a mailto: or https: URL push services can reach the operator at.
    notifications_vapid_subject: str | None = None
    # Where notification links point (ntfy ``click``, the Web Push payload's ``url``).
    notifications_console_url: str | None = None
    # One send (connect, request and answer) may take at most this long.
    notifications_send_timeout_seconds: Annotated[float, msgspec.Meta(gt=0, le=300)] = 10.0
    # Connections the shared HTTP session (ntfy) keeps open at most, and the Web Push
    # client per push service origin.
    notifications_http_connections: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 100

    def __repr__(self) -> str:
        # The VAPID private key must not reach a log line through a repr.
        shown = {
            f.name: getattr(self, f.name)
            for f in msgspec.structs.fields(self)
            if f.name != "notifications_vapid_private_key"
        }
        shown["notifications_vapid_private_key"] = (
            "<set>" if self.notifications_vapid_private_key else None
        )
        fields = ", ".join(f"{name}={value!r}" for name, value in shown.items())
        return f"{type(self).__name__}({fields})"


def load_channel_settings(environ: Mapping[str, str] | None = None) -> ChannelSettings:
    """``ChannelSettings`` from ``MOWDECK_*`` variables."""
    return load_settings(ChannelSettings, environ)
