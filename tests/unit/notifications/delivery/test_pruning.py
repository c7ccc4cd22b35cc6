"""The delivery's pruning round: its cutoff, a round another replica holds, counted rows."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from mowdeck.notifications.delivery.metrics import DeliveryMetrics
from mowdeck.notifications.delivery.pruning import DeliveryPruning
from mowdeck.notifications.delivery.settings import DeliverySettings
from tests.unit.notifications.samples import at


class PruningStore:
    """Answers ``prune_deliveries`` with ``deleted`` and keeps the cutoffs it was given."""

    def __init__(self, deleted: int | None) -> None:
        self.deleted = deleted
        self.cutoffs: list[datetime] = []

    async def prune_deliveries(self, before: datetime) -> int | None:
        self.cutoffs.append(before)
        return self.deleted


@pytest.mark.parametrize(
    ("deleted", "answer", "counted"),
    [
        (None, None, None),
        (0, {"notification_deliveries": 0}, 0.0),
        (3, {"notification_deliveries": 3}, 3.0),
    ],
    ids=["another replica holds the lock", "nothing finished that long ago", "three rows"],
)
async def test_a_round_deletes_what_finished_before_the_retention(
    deleted: int | None, answer: dict[str, int] | None, counted: float | None
) -> None:
    store, registry = PruningStore(deleted), CollectorRegistry()
    settings = DeliverySettings(notifications_delivery_retention_days=7)
    pruning = DeliveryPruning(
        store,  # type: ignore[arg-type] # only prune_deliveries is asked
        settings,
        DeliveryMetrics(registry),
        clock=lambda: at(0),
    )
    assert await pruning.run_once() == answer
    assert store.cutoffs == [at(0) - timedelta(days=7)]
    labels = {"table": "notification_deliveries"}
    assert (
        registry.get_sample_value("mowdeck_notifications_deliveries_pruned_total", labels)
        == counted
    )
