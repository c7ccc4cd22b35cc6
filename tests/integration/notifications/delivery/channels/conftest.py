"""Channels against local receivers on 127.0.0.1, through the guarded shared session."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest
from py_vapid import Vapid02

from mowdeck.notifications.delivery.channels import ChannelSettings, Delivery, open_channel_session
from mowdeck.notifications.delivery.targets import TargetPolicy

SETTINGS = ChannelSettings(
    notifications_push_hosts=["127.0.0.1"],
    notifications_insecure_hosts=["127.0.0.1"],
    notifications_vapid_subject="mailto:ops@mowdeck.example",
    notifications_send_timeout_seconds=5.0,
)
POLICY = TargetPolicy.from_settings(SETTINGS)


def ntfy_policy(*servers: str) -> TargetPolicy:
    return TargetPolicy.from_settings(
        ChannelSettings(
            notifications_ntfy_servers=list(servers),
            notifications_insecure_hosts=["127.0.0.1"],
        )
    )


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    s = open_channel_session(SETTINGS)
    yield s
    await s.close()


@pytest.fixture
def vapid() -> Vapid02:
    v = Vapid02()
    v.generate_keys()
    return v


MakeDelivery = Callable[..., Delivery]


@pytest.fixture
def make_delivery() -> MakeDelivery:
    def make(target: dict[str, Any], **extra: Any) -> Delivery:
        fields: dict[str, Any] = {
            "delivery_id": "d-1",
            "user_id": "u-1",
            "channel": target["channel"],
            "target": target,
            "kind": "battery_low",
            "mower_id": "m-7",
            "severity": "warning",
            "title": "Battery low",
            "body": "Mower 7 is at 18 %",
            "occurred_at": datetime(2026, 6, 1, 12, tzinfo=UTC),
            "dedupe_key": "battery_low:m-7:1",
        }
        fields.update(extra)
        return Delivery(**fields)

    return make
