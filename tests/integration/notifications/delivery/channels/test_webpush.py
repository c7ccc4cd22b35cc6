"""The webpush channel against a local push service that checks VAPID and decrypts."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest
from py_vapid import Vapid02

from mowdeck.notifications.delivery.channels import ChannelSettings
from mowdeck.notifications.delivery.channels.pushhttp import PushClient
from mowdeck.notifications.delivery.channels.webpush import WebPushChannel, push_topic
from mowdeck.notifications.delivery.targets import TargetPolicy, validate_target
from tests.integration.notifications.delivery.channels.conftest import POLICY, MakeDelivery
from tests.support.webpush_receiver import Answer, BrowserSubscription, WebPushReceiver
from tests.unit.notifications.samples import EpochClock


@pytest.fixture
async def client() -> AsyncIterator[PushClient]:
    c = PushClient(POLICY)
    yield c
    await c.close()


@pytest.fixture
async def other_receiver() -> AsyncIterator[WebPushReceiver]:
    async with WebPushReceiver() as r:
        yield r


def channel_for(
    client: PushClient, vapid: Vapid02, clock: EpochClock | None = None, timeout: float = 5
) -> WebPushChannel:
    return WebPushChannel(
        client,
        vapid,
        subject="mailto:ops@mowdeck.example",
        policy=POLICY,
        timeout=timeout,
        console_url="https://console.mowdeck.example/mowers/m-7",
        clock=clock or time.time,
    )


def target(sub: BrowserSubscription) -> dict[str, object]:
    doc = {"channel": "webpush", "subscription": sub.to_json()}
    assert not isinstance(validate_target(doc, POLICY), list)
    return doc


async def test_a_push_arrives_decrypted_with_its_headers(
    client: PushClient,
    vapid: Vapid02,
    receiver: WebPushReceiver,
    make_delivery: MakeDelivery,
) -> None:
    sub = receiver.subscribe()
    channel = channel_for(client, vapid)
    result = await channel.send(make_delivery(target(sub)))
    assert (result.status, result.http_status) == ("sent", 201)
    assert receiver.problems == []
    [got] = receiver.received_by(sub)
    topic = push_topic("battery_low", "m-7")
    assert got.payload == {
        "title": "Battery low",
        "body": "Mower 7 is at 18 %",
        "kind": "battery_low",
        "mower_id": "m-7",
        "severity": "warning",
        "tag": topic,
        "url": "https://console.mowdeck.example/mowers/m-7",
    }
    assert got.headers == {"TTL": "21600", "Urgency": "normal", "Topic": topic}
    assert got.claims["aud"] == receiver.origin
    assert got.claims["sub"] == "mailto:ops@mowdeck.example"


@pytest.mark.parametrize(
    ("severity", "ttl", "urgency"),
    [("critical", "86400", "high"), ("warning", "21600", "normal"), ("info", "3600", "low")],
    ids=["critical", "warning", "info"],
)
async def test_ttl_and_urgency_reach_the_push_service(  # noqa: PLR0917 - fixtures plus a table row
    client: PushClient,
    vapid: Vapid02,
    receiver: WebPushReceiver,
    make_delivery: MakeDelivery,
    severity: str,
    ttl: str,
    urgency: str,
) -> None:
    sub = receiver.subscribe()
    await channel_for(client, vapid).send(make_delivery(target(sub), severity=severity))
    [got] = receiver.received_by(sub)
    assert (got.headers["TTL"], got.headers["Urgency"]) == (ttl, urgency)


async def test_back_online_carries_the_topic_of_offline(
    client: PushClient,
    vapid: Vapid02,
    receiver: WebPushReceiver,
    make_delivery: MakeDelivery,
) -> None:
    sub = receiver.subscribe()
    channel = channel_for(client, vapid)
    await channel.send(make_delivery(target(sub), kind="mower_offline"))
    await channel.send(make_delivery(target(sub), kind="mower_online", severity="info"))
    await channel.send(make_delivery(target(sub), kind="battery_low"))
    offline, online, battery = (r.headers["Topic"] for r in receiver.received_by(sub))
    assert offline == online != battery
    assert len(offline) <= 32


def http_date(seconds_from_now: float) -> str:
    return format_datetime(datetime.fromtimestamp(time.time() + seconds_from_now, UTC), usegmt=True)


@pytest.mark.parametrize(
    ("answer", "status", "http_status", "retry_after"),
    [
        (Answer(201), "sent", 201, None),
        (Answer(202), "sent", 202, None),
        (Answer(404), "gone", 404, None),
        (Answer(410), "gone", 410, None),
        (Answer(429, {"Retry-After": "30"}), "retry", 429, 30.0),
        (Answer(429, {"Retry-After": "<in 600 s>"}), "retry", 429, 600.0),
        (Answer(500), "retry", 500, None),
        (Answer(503, {"Retry-After": "5"}), "retry", 503, 5.0),
        (Answer(400), "failed", 400, None),
        (Answer(403), "failed", 403, None),
        (Answer(413), "failed", 413, None),
    ],
    ids=["201", "202", "404", "410", "429-seconds", "429-date", "500", "503", "400", "403", "413"],
)
async def test_every_answer_of_the_push_service(  # noqa: PLR0917 - fixtures plus a table row
    client: PushClient,
    vapid: Vapid02,
    receiver: WebPushReceiver,
    make_delivery: MakeDelivery,
    answer: Answer,
    status: str,
    http_status: int,
    retry_after: float | None,
) -> None:
    sub = receiver.subscribe()
    if answer.headers.get("Retry-After") == "<in 600 s>":
        # An HTTP date made when the test runs, not when the table was collected.
        answer.headers["Retry-After"] = http_date(600)
    receiver.answer(sub, answer)
    result = await channel_for(client, vapid).send(make_delivery(target(sub)))
    assert (result.status, result.http_status) == (status, http_status)
    if retry_after is None:
        assert result.retry_after is None
    else:
        assert result.retry_after == pytest.approx(retry_after, abs=2)


async def test_a_stalled_push_service_is_a_retry_after_the_timeout(
    client: PushClient,
    vapid: Vapid02,
    receiver: WebPushReceiver,
    make_delivery: MakeDelivery,
) -> None:
    sub = receiver.subscribe()
    receiver.answer(sub, Answer(stall=30))
    started = time.monotonic()
    result = await channel_for(client, vapid, timeout=0.3).send(make_delivery(target(sub)))
    assert time.monotonic() - started < 5
    assert result.status == "retry"
    assert "no answer within 0.3 s" in result.reason


async def test_a_closed_port_is_a_retry(
    client: PushClient, vapid: Vapid02, make_delivery: MakeDelivery
) -> None:
    async with WebPushReceiver() as gone:
        sub = gone.subscribe()
    result = await channel_for(client, vapid).send(make_delivery(target(sub)))
    assert result.status == "retry"
    assert result.reason.startswith("connection failed")


@pytest.mark.parametrize("redirect", [301, 302, 307, 308], ids=str)
async def test_a_redirect_is_not_followed(  # noqa: PLR0917 - fixtures plus a table row
    client: PushClient,
    vapid: Vapid02,
    receiver: WebPushReceiver,
    other_receiver: WebPushReceiver,
    make_delivery: MakeDelivery,
    redirect: int,
) -> None:
    sub = receiver.subscribe()
    elsewhere = other_receiver.subscribe()
    receiver.answer(sub, Answer(redirect, redirect_to=elsewhere.endpoint))
    channel = channel_for(client, vapid)
    result = await channel.send(make_delivery(target(sub)))
    assert (result.status, result.http_status) == ("failed", redirect)
    # The sentinel: a push straight to the redirect target arrives, and is all it got.
    sentinel = await channel.send(make_delivery(target(elsewhere), title="sentinel"))
    assert sentinel.status == "sent"
    await other_receiver.wait_for(1)
    assert [r.payload["title"] for r in other_receiver.received if r.payload] == ["sentinel"]
    assert other_receiver.count == 1


async def test_one_jwt_per_push_service_origin(
    client: PushClient,
    vapid: Vapid02,
    receiver: WebPushReceiver,
    other_receiver: WebPushReceiver,
    make_delivery: MakeDelivery,
) -> None:
    channel = channel_for(client, vapid)
    a1, a2 = receiver.subscribe(), receiver.subscribe()
    b1 = other_receiver.subscribe()
    for sub in (a1, a2, b1, a1):
        assert (await channel.send(make_delivery(target(sub)))).status == "sent"
    here = receiver.received
    there = other_receiver.received
    assert {r.jwt for r in here} == {here[0].jwt}
    assert there[0].jwt != here[0].jwt
    assert here[0].claims["aud"] == receiver.origin
    assert there[0].claims["aud"] == other_receiver.origin
    assert channel.signatures == 2
    assert receiver.problems == other_receiver.problems == []


async def test_a_jwt_near_expiry_is_signed_again(
    client: PushClient,
    vapid: Vapid02,
    receiver: WebPushReceiver,
    make_delivery: MakeDelivery,
) -> None:
    clock = EpochClock(time.time())
    channel = channel_for(client, vapid, clock)
    sub = receiver.subscribe()
    await channel.send(make_delivery(target(sub)))
    clock.now += 10 * 3600
    await channel.send(make_delivery(target(sub)))
    clock.now += 1.5 * 3600
    await channel.send(make_delivery(target(sub)))
    first, reused, fresh = receiver.received_by(sub)
    assert first.jwt == reused.jwt != fresh.jwt
    assert fresh.claims["exp"] == int(clock.now + 12 * 3600)
    assert channel.signatures == 2
    assert receiver.problems == []


async def test_an_endpoint_outside_the_policy_is_not_called(
    client: PushClient,
    vapid: Vapid02,
    receiver: WebPushReceiver,
    make_delivery: MakeDelivery,
) -> None:
    sub = receiver.subscribe()
    doc = {"channel": "webpush", "subscription": sub.to_json()}
    doc["subscription"]["endpoint"] = sub.endpoint.replace("127.0.0.1", "localhost")  # type: ignore[index]
    result = await channel_for(client, vapid).send(make_delivery(doc))
    assert (result.status, result.reason) == ("failed", "endpoint must be an https URL")
    assert receiver.count == 0


async def test_a_long_body_is_shortened_to_fit_one_record(
    client: PushClient,
    vapid: Vapid02,
    receiver: WebPushReceiver,
    make_delivery: MakeDelivery,
) -> None:
    sub = receiver.subscribe()
    result = await channel_for(client, vapid).send(make_delivery(target(sub), body="ä" * 5000))
    assert result.status == "sent"
    [got] = receiver.received_by(sub)
    assert got.payload is not None
    assert got.payload["body"].endswith("…")
    assert got.payload["title"] == "Battery low"


async def test_keys_that_are_not_a_p256_point_fail_without_a_request(
    client: PushClient,
    vapid: Vapid02,
    receiver: WebPushReceiver,
    make_delivery: MakeDelivery,
) -> None:
    broken, sentinel = receiver.subscribe(), receiver.subscribe()
    doc = {"channel": "webpush", "subscription": broken.to_json()}
    # A point off the curve (a stored row from before validation, or tampered with).
    doc["subscription"]["keys"]["p256dh"] = "BA" + "A" * 85  # type: ignore[index]
    channel = channel_for(client, vapid)
    result = await channel.send(make_delivery(doc))
    assert result.status == "failed"
    assert result.reason.startswith("subscription keys are not valid")
    assert (await channel.send(make_delivery(target(sentinel)))).status == "sent"
    assert [r.subscription_id for r in receiver.received] == [sentinel.id]


async def test_a_name_resolving_to_an_internal_address_is_refused_at_send_time(
    vapid: Vapid02, receiver: WebPushReceiver, make_delivery: MakeDelivery
) -> None:
    # A name that passed validation and now resolves to loopback (DNS rebinding).
    policy = TargetPolicy.from_settings(ChannelSettings(notifications_push_hosts=["localhost"]))
    client = PushClient(policy)
    channel = WebPushChannel(
        client, vapid, subject="mailto:ops@mowdeck.example", policy=policy, timeout=5
    )
    sub, sentinel = receiver.subscribe(), receiver.subscribe()
    doc = {"channel": "webpush", "subscription": sub.to_json()}
    port = receiver.origin.rsplit(":", 1)[1]
    doc["subscription"]["endpoint"] = f"https://localhost:{port}/push/{sub.id}"  # type: ignore[index]
    try:
        result = await channel.send(make_delivery(doc))
    finally:
        await channel.close()
    assert result.status == "failed"
    assert result.reason.startswith("refused: localhost resolves to")
    # The sentinel, sent where the insecure policy allows it, is the only push that arrived.
    allowed = channel_for(PushClient(POLICY), vapid)
    try:
        ok = await allowed.send(make_delivery(target(sentinel)))
    finally:
        await allowed.close()
    assert ok.status == "sent"
    assert receiver.count == 1
