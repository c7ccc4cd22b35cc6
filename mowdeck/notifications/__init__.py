"""Notifications: rules over mower states, recipients, the inbox (ADR 0022).

The pure core is ``rules`` (with ``watch``, ``events``, ``emitter``), ``recipients``,
``quiet``, ``preferences`` and ``templates``; storage is the ``NotificationStore`` port
(``ports``) with a PostgreSQL and an in-memory adapter.
"""

from mowdeck.notifications.errors import NotificationsError
from mowdeck.notifications.settings import NotificationsSettings, load_notifications_settings

__all__ = ["NotificationsError", "NotificationsSettings", "load_notifications_settings"]
