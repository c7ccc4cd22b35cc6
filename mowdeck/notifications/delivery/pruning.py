"""Pruning: every hour each replica tries a round; the one holding the lock deletes.

The round is a ``kit.housekeeping`` one, as Fleet's pruning and Telemetry's retention are:
deliveries finished more than ``MOWDECK_NOTIFICATIONS_DELIVERY_RETENTION_DAYS`` ago go,
under the advisory lock of ``PostgresDeliveries.prune_deliveries``, counted on
``mowdeck_notifications_deliveries_pruned_total``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from mowdeck.kit.housekeeping import Housekeeping
from mowdeck.notifications.delivery.metrics import DeliveryMetrics
from mowdeck.notifications.delivery.ports import DeliveryStore
from mowdeck.notifications.delivery.settings import DeliverySettings

__all__ = ["PRUNE_INTERVAL_SECONDS", "DeliveryPruning"]

PRUNE_INTERVAL_SECONDS = 3600.0
_TABLE = "notification_deliveries"


class DeliveryPruning(Housekeeping):
    """The delivery's pruning round."""

    def __init__(
        self,
        store: DeliveryStore,
        settings: DeliverySettings,
        metrics: DeliveryMetrics,
        *,
        clock: Callable[[], datetime],
    ) -> None:
        async def prune() -> dict[str, int] | None:
            deleted = await store.prune_deliveries(clock() - settings.delivery_retention)
            return None if deleted is None else {_TABLE: deleted}

        super().__init__(
            "notifications-delivery-pruning",
            PRUNE_INTERVAL_SECONDS,
            prune,
            metrics.pruned,
            what="delivery pruning",
        )
