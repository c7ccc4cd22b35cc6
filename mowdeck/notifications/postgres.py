"""Where ``mowdeck/demo.py`` imports ``PostgresNotificationStore`` from: the store is in
``inbox/postgres.py``. This goes once the demo imports it from there."""

from mowdeck.notifications.inbox.postgres import PostgresNotificationStore

__all__ = ["PostgresNotificationStore"]
