"""The delivery's pruning round on PostgreSQL, after a worker sent and retried."""

from __future__ import annotations

import asyncpg

from mowdeck.notifications.delivery.pruning import DeliveryPruning
from mowdeck.notifications.inbox.model import InboxEntry
from mowdeck.notifications.infra import Stores
from tests.integration.notifications.delivery.worker_support import (
    delivery_settings,
    register,
    rows,
    worker_for,
)
from tests.support.webpush_receiver import Answer, WebPushReceiver
from tests.unit.notifications.samples import Clock, at
from tests.unit.notifications.stores import fan_out


async def test_finished_deliveries_are_pruned_after_the_retention(
    stores: Stores, pool: asyncpg.Pool, receiver: WebPushReceiver
) -> None:
    sub = receiver.subscribe()
    await register(stores, "ann", sub)
    await fan_out(stores, "k1", [InboxEntry(user_id="ann")])
    await fan_out(stores, "k2", [InboxEntry(user_id="ann")])
    receiver.answer(sub, Answer(201), Answer(503))
    clock = Clock(at(20_000))
    settings = delivery_settings()
    async with worker_for(stores.deliveries, settings, clock) as running:
        await running.worker.run_once()
        pruning = DeliveryPruning(stores.deliveries, settings, running.metrics, clock=clock)
        clock.advance(7 * 86400 - 1)
        assert await pruning.run_once() == {"notification_deliveries": 0}
        clock.advance(2)
        assert await pruning.run_once() == {"notification_deliveries": 1}
        await running.worker.backlog()
    [row] = await rows(pool)
    assert row["state"] == "due"  # the retried one is kept
    assert running.registry.get_sample_value("mowdeck_notifications_deliveries_due") == 1
    pruned = {"table": "notification_deliveries"}
    value = running.registry.get_sample_value(
        "mowdeck_notifications_deliveries_pruned_total", pruned
    )
    assert value == 1
