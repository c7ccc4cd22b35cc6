"""What a webpush channel keeps of the subscriptions it sends to: its own, bounded, until closed."""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime

from py_vapid import Vapid02

from mowdeck.notifications.delivery.channels.ece import subscription_keys
from mowdeck.notifications.delivery.channels.port import Delivery
from mowdeck.notifications.delivery.channels.pushwire import (
    PushResponse,
    PushURL,
    ResponseHeaders,
)
from mowdeck.notifications.delivery.channels.settings import ChannelSettings
from mowdeck.notifications.delivery.channels.webpush import WebPushChannel
from mowdeck.notifications.delivery.targets import TargetPolicy
from tests.unit.notifications.delivery.channels.keys import P256DH, b64url

POLICY = TargetPolicy.from_settings(ChannelSettings())


class AcceptingClient:
    """Answers every push 201, without a network; counts them."""

    def __init__(self) -> None:
        self.posts = 0

    async def post(
        self, url: PushURL, body: bytes, headers: Mapping[str, str], timeout: float
    ) -> PushResponse:
        self.posts += 1
        return PushResponse(201, "Created", ResponseHeaders({}), b"")

    async def close(self) -> None:
        pass


def channel(kept: int) -> WebPushChannel:
    vapid = Vapid02()
    vapid.generate_keys()
    return WebPushChannel(
        AcceptingClient(),  # type: ignore[arg-type] # answers as the push client does
        vapid,
        subject="mailto:ops@mowdeck.example",
        policy=POLICY,
        timeout=5,
        subscriptions_kept=kept,
    )


def delivery(n: int) -> Delivery:
    """A delivery to the ``n``-th browser (each with an auth secret of its own)."""
    subscription = {
        "endpoint": f"https://fcm.googleapis.com/fcm/send/browser-{n}",
        "keys": {"p256dh": P256DH, "auth": b64url(os.urandom(16))},
    }
    return Delivery(
        delivery_id=str(n),
        user_id="ann",
        channel="webpush",
        target={"channel": "webpush", "subscription": subscription},
        kind="battery_low",
        mower_id="m-7",
        severity="warning",
        title="Battery low",
        body="18 %",
        occurred_at=datetime(2026, 6, 1, 12, tzinfo=UTC),
        dedupe_key=f"battery_low:m-7:{n}",
    )


async def test_a_channel_holds_at_most_its_bound_of_subscriptions_and_none_when_closed() -> None:
    first, second = channel(kept=2), channel(kept=2)
    for n in range(3):
        assert (await first.send(delivery(n))).status == "sent"
    assert first.subscriptions_held == 2
    assert second.subscriptions_held == 0  # nothing shared between channels
    await first.close()
    assert first.subscriptions_held == 0


def test_no_subscription_secret_is_kept_outside_a_channel() -> None:
    auth = b64url(os.urandom(16))
    assert subscription_keys(P256DH, auth) is not subscription_keys(P256DH, auth)
