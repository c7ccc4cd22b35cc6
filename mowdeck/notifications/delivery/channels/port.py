"""The channel port: what a delivery carries, what a send answers, what a channel is."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal, Protocol

import aiohttp
import msgspec

from mowdeck.notifications.delivery.channels.settings import ChannelSettings

__all__ = [
    "ChannelFactory",
    "Delivery",
    "DeliveryResult",
    "DeliveryStatus",
    "NotificationChannel",
    "Severity",
]

Severity = Literal["info", "warning", "critical"]
DeliveryStatus = Literal["sent", "retry", "gone", "failed"]


class Delivery(msgspec.Struct, frozen=True, kw_only=True):
    """One notification for one target of one user, rendered in the user's language.

    ``target`` is the stored target document of ``channel`` (for the shipped channels a
    ``targets.Target`` as builtins); ``attempt`` counts from 1.
    """

    delivery_id: str
    user_id: str
    channel: str
    target: dict[str, Any]
    kind: str
    mower_id: str
    severity: Severity
    title: str
    body: str
    occurred_at: datetime
    dedupe_key: str
    attempt: int = 1
    console_url: str | None = None

    def __repr__(self) -> str:
        # A target may hold an access token; a repr in a log line must not show it.
        return (
            f"Delivery(delivery_id={self.delivery_id!r}, user_id={self.user_id!r},"
            f" channel={self.channel!r}, kind={self.kind!r}, mower_id={self.mower_id!r},"
            f" severity={self.severity!r}, attempt={self.attempt})"
        )


class DeliveryResult(msgspec.Struct, frozen=True, kw_only=True):
    """What became of one send.

    ``sent``: accepted by the service. ``retry``: try again later, after ``retry_after``
    seconds when the server named a time. ``gone``: the target no longer exists (delete
    it). ``failed``: permanent for this delivery; ``reason`` says why.
    """

    status: DeliveryStatus
    reason: str = ""
    http_status: int | None = None
    retry_after: float | None = None


class NotificationChannel(Protocol):
    """A way to reach a user: Web Push, ntfy, e-mail, ..."""

    @property
    def name(self) -> str:
        """The channel name deliveries carry (the entry point name)."""

    async def send(self, delivery: Delivery) -> DeliveryResult:
        """Deliver once; never raises for what the remote side does."""

    async def close(self) -> None:
        """Release what the channel holds (not the shared HTTP session)."""


ChannelFactory = Callable[[ChannelSettings, aiohttp.ClientSession], NotificationChannel]
"""What an entry point of ``mowdeck.notification_channels`` names."""
