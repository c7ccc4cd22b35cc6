"""The webpush channel's pure parts (answers, topics, headers) and what it keeps of the
subscriptions it sends to: its own, bounded, until closed."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import UTC, datetime

import pytest
from py_vapid import Vapid02

from mowdeck.notifications.delivery.channels.ece import subscription_keys
from mowdeck.notifications.delivery.channels.port import Delivery, DeliveryResult
from mowdeck.notifications.delivery.channels.pushwire import (
    PushResponse,
    PushURL,
    ResponseHeaders,
)
from mowdeck.notifications.delivery.channels.settings import ChannelSettings
from mowdeck.notifications.delivery.channels.webpush import (
    WebPushChannel,
    push_headers,
    push_topic,
    webpush_answer,
)
from mowdeck.notifications.delivery.targets import TargetPolicy
from tests.unit.notifications.delivery.channels.keys import P256DH, b64url

NOW = 1_800_000_000.0
KINDS = [
    "job_started",
    "mowing_finished",
    "mower_stuck",
    "battery_low",
    "mower_offline",
    "mower_online",
]


@pytest.mark.parametrize(
    ("status", "headers", "expected"),
    [
        (201, {}, DeliveryResult(status="sent", http_status=201)),
        (200, {}, DeliveryResult(status="sent", http_status=200)),
        (202, {}, DeliveryResult(status="sent", http_status=202)),
        (404, {}, DeliveryResult(status="gone", http_status=404, reason="subscription expired")),
        (410, {}, DeliveryResult(status="gone", http_status=410, reason="subscription expired")),
        (
            429,
            {"Retry-After": "120"},
            DeliveryResult(
                status="retry", http_status=429, retry_after=120.0, reason="rate limited"
            ),
        ),
        (429, {}, DeliveryResult(status="retry", http_status=429, reason="rate limited")),
        (500, {}, DeliveryResult(status="retry", http_status=500, reason="server error")),
        (
            503,
            {"Retry-After": "7"},
            DeliveryResult(status="retry", http_status=503, retry_after=7.0, reason="server error"),
        ),
        (413, {}, DeliveryResult(status="failed", http_status=413, reason="payload too large")),
        (
            403,
            {},
            DeliveryResult(status="failed", http_status=403, reason="VAPID authorization refused"),
        ),
        (
            400,
            {},
            DeliveryResult(
                status="failed", http_status=400, reason="push service refused the request"
            ),
        ),
        (418, {}, DeliveryResult(status="failed", http_status=418, reason="HTTP 418")),
        (301, {}, DeliveryResult(status="failed", http_status=301, reason="redirect not followed")),
    ],
    ids=[
        "201",
        "200",
        "202",
        "404",
        "410",
        "429-after",
        "429",
        "500",
        "503-after",
        "413",
        "403",
        "400",
        "418",
        "301",
    ],
)
def test_webpush_answers(status: int, headers: dict[str, str], expected: DeliveryResult) -> None:
    assert webpush_answer(status, headers, NOW) == expected


def test_offline_and_online_share_one_topic_per_mower() -> None:
    assert push_topic("mower_offline", "m-1") == push_topic("mower_online", "m-1")
    assert push_topic("mower_offline", "m-1") != push_topic("mower_offline", "m-2")
    assert push_topic("battery_low", "m-1") != push_topic("mower_offline", "m-1")


@pytest.mark.parametrize("kind", KINDS)
def test_topics_are_short_and_url_safe(kind: str) -> None:
    for mower in ("m", "x" * 500, "ümlaut/mower?id=1"):
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,32}", push_topic(kind, mower))
    topics = {push_topic(kind, f"mower-{i}") for i in range(1000)}
    assert len(topics) == 1000


@pytest.mark.parametrize(
    ("severity", "ttl", "urgency"),
    [("critical", "86400", "high"), ("warning", "21600", "normal"), ("info", "3600", "low")],
    ids=["critical", "warning", "info"],
)
def test_ttl_and_urgency_by_severity(severity: str, ttl: str, urgency: str) -> None:
    headers = push_headers(severity, "battery_low", "m-1")  # type: ignore[arg-type]
    assert (headers["TTL"], headers["Urgency"]) == (ttl, urgency)
    assert headers["Content-Encoding"] == "aes128gcm"


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
