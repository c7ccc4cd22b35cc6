"""Notifications: rules over mower states, recipients, the inbox, delivery (ADR 0022).

Four parts, each with its own ports and adapters: ``rules`` (pure), ``ingest`` (states,
link events and the offline scan into watches and events), ``inbox`` (recipients, the
fan-out, the inbox, preferences) and ``delivery`` (targets, the delivery worker, the
channels). ``service`` composes them.
"""

from mowdeck.notifications.errors import NotificationsError
from mowdeck.notifications.settings import NotificationsSettings, load_notifications_settings

__all__ = ["NotificationsError", "NotificationsSettings", "load_notifications_settings"]
