"""What ``mowdeck/demo.py`` imports from here: ``PostgresNotificationStore(pool)``, with
which it saves the demo user's preferences and log target. The stores are the parts' now
(``service.Stores``); this goes once the demo uses them."""

from __future__ import annotations

import asyncpg

from mowdeck.notifications.infra import Stores

__all__ = ["PostgresNotificationStore"]


class PostgresNotificationStore:
    """The demo's calls on the stores of ``pool``."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        stores = Stores.postgres(pool)
        self.put_preferences = stores.preferences.put_preferences
        self.list_targets = stores.targets.list_targets
        self.add_target = stores.targets.add_target
