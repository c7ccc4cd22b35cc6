"""A delivery worker against local receivers: settings, channels, targets, row readers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
import asyncpg
from prometheus_client import CollectorRegistry
from py_vapid import Vapid02

from mowdeck.notifications.delivery.channels import NotificationChannels, open_channel_session
from mowdeck.notifications.delivery.channels.ntfy import NtfyChannel
from mowdeck.notifications.delivery.channels.pushhttp import PushClient
from mowdeck.notifications.delivery.channels.webpush import WebPushChannel
from mowdeck.notifications.delivery.metrics import DeliveryMetrics
from mowdeck.notifications.delivery.ports import DeliveryStore
from mowdeck.notifications.delivery.settings import DeliverySettings
from mowdeck.notifications.delivery.targets import TargetPolicy, validate_target
from mowdeck.notifications.delivery.worker import DeliveryWorker
from mowdeck.notifications.infra import Stores
from tests.support.webpush_receiver import BrowserSubscription

SUBJECT = "mailto:ops@mowdeck.example"


def delivery_settings(*ntfy_servers: str, **extra: Any) -> DeliverySettings:
    """Settings that allow the receivers on 127.0.0.1."""
    fields: dict[str, Any] = {
        "notifications_push_hosts": ["127.0.0.1"],
        "notifications_insecure_hosts": ["127.0.0.1"],
        "notifications_ntfy_servers": list(ntfy_servers) or ["https://ntfy.sh"],
        "notifications_vapid_subject": SUBJECT,
        "notifications_send_timeout_seconds": 2.0,
    }
    fields.update(extra)
    return DeliverySettings(**fields)


async def register(stores: Stores, user: str, sub: BrowserSubscription) -> None:
    """``sub`` as a Web Push target of ``user``, validated as the target API does."""
    policy = TargetPolicy.from_settings(delivery_settings())
    target = validate_target({"channel": "webpush", "subscription": sub.to_json()}, policy)
    assert not isinstance(target, list), target
    await stores.targets.add_target(user, target)


def channels_for(
    session: aiohttp.ClientSession, settings: DeliverySettings, vapid: Vapid02
) -> NotificationChannels:
    """webpush (its own push client) and ntfy over ``session``."""
    policy = TargetPolicy.from_settings(settings)
    timeout = settings.notifications_send_timeout_seconds
    return NotificationChannels(
        {
            "webpush": WebPushChannel(
                PushClient(policy), vapid, subject=SUBJECT, policy=policy, timeout=timeout
            ),
            "ntfy": NtfyChannel(session, policy=policy, timeout=timeout),
        }
    )


@dataclass
class Running:
    worker: DeliveryWorker
    metrics: DeliveryMetrics
    registry: CollectorRegistry

    def count(self, result: str, channel: str = "webpush") -> float:
        value = self.registry.get_sample_value(
            "mowdeck_notifications_deliveries_total", {"channel": channel, "result": result}
        )
        return value or 0.0


@asynccontextmanager
async def worker_for(
    store: DeliveryStore,
    settings: DeliverySettings,
    clock: Any = None,
    *,
    start: bool = False,
    listen: bool = True,
) -> AsyncIterator[Running]:
    """A worker with its own session and channels (stopped and closed at exit)."""
    vapid = Vapid02()
    vapid.generate_keys()
    session = open_channel_session(settings)
    registry = CollectorRegistry()
    metrics = DeliveryMetrics(registry)
    extra = {} if clock is None else {"clock": clock}
    channels = channels_for(session, settings, vapid)
    worker = DeliveryWorker(store, channels, settings, metrics, listen=listen, **extra)
    if start:
        worker.start()
    try:
        yield Running(worker, metrics, registry)
    finally:
        await worker.stop()
        await channels.close()
        await session.close()


async def rows(pool: asyncpg.Pool) -> list[asyncpg.Record]:
    """Every delivery row, by id."""
    return list(
        await pool.fetch(
            "SELECT id, state, attempts, next_attempt_at, last_error, finished_at, params::text"
            " FROM notification_deliveries ORDER BY id"
        )
    )
