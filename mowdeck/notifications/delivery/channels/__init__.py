"""Notification channels: the plug-in port, webpush, ntfy, log and their HTTP client."""

from mowdeck.notifications.delivery.channels.http import open_channel_session
from mowdeck.notifications.delivery.channels.loader import (
    ENTRY_POINT_GROUP,
    ChannelLoadError,
    NotificationChannels,
    load_channels,
)
from mowdeck.notifications.delivery.channels.port import (
    ChannelFactory,
    Delivery,
    DeliveryResult,
    DeliveryStatus,
    NotificationChannel,
)
from mowdeck.notifications.delivery.channels.settings import ChannelSettings, load_channel_settings

__all__ = [
    "ENTRY_POINT_GROUP",
    "ChannelFactory",
    "ChannelLoadError",
    "ChannelSettings",
    "Delivery",
    "DeliveryResult",
    "DeliveryStatus",
    "NotificationChannel",
    "NotificationChannels",
    "load_channel_settings",
    "load_channels",
    "open_channel_session",
]
