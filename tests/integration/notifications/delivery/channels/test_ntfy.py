"""The ntfy channel against a local ntfy server that checks the JSON and the token."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
import structlog

from mowdeck.notifications.delivery.channels.log import LogChannel
from mowdeck.notifications.delivery.channels.ntfy import NtfyChannel
from mowdeck.notifications.delivery.targets import NtfyTarget, validate_target
from tests.integration.notifications.delivery.channels.conftest import MakeDelivery, ntfy_policy
from tests.support.ntfy_receiver import NtfyAnswer, NtfyReceiver

TOKEN = "tk_s3cretvalue0123456789abcdefg"


@pytest.fixture
async def receiver() -> AsyncIterator[NtfyReceiver]:
    async with NtfyReceiver(token=TOKEN) as r:
        yield r


@pytest.fixture
async def other() -> AsyncIterator[NtfyReceiver]:
    async with NtfyReceiver() as r:
        yield r


def channel_for(
    session: aiohttp.ClientSession, *servers: str, timeout: float = 5, console: str | None = None
) -> NtfyChannel:
    return NtfyChannel(session, policy=ntfy_policy(*servers), timeout=timeout, console_url=console)


def target(server: str, token: str | None = TOKEN) -> dict[str, object]:
    doc = {"channel": "ntfy", "server": server, "topic": "lawn-alerts", "token": token}
    assert isinstance(validate_target(doc, ntfy_policy(server)), NtfyTarget)
    return doc


async def test_a_publish_carries_title_priority_tags_click_and_token(
    session: aiohttp.ClientSession, receiver: NtfyReceiver, make_delivery: MakeDelivery
) -> None:
    channel = channel_for(session, receiver.url, console="https://console.mowdeck.example")
    result = await channel.send(make_delivery(target(receiver.url)))
    assert (result.status, result.http_status) == ("sent", 200)
    [published] = receiver.published
    assert published.message == {
        "topic": "lawn-alerts",
        "title": "Battery low",
        "message": "Mower 7 is at 18 %",
        "priority": 4,
        "tags": ["warning", "battery"],
        "click": "https://console.mowdeck.example",
    }
    assert published.authorization == f"Bearer {TOKEN}"
    assert receiver.problems == []


async def test_a_wrong_token_fails_without_showing_the_token(
    session: aiohttp.ClientSession,
    receiver: NtfyReceiver,
    make_delivery: MakeDelivery,
    caplog: pytest.LogCaptureFixture,
) -> None:
    wrong = "tk_wrongwrongwrongwrongwrong12"
    delivery = make_delivery(target(receiver.url, token=wrong))
    caplog.set_level(logging.DEBUG)
    with structlog.testing.capture_logs() as logs:
        result = await channel_for(session, receiver.url).send(delivery)
        await LogChannel().send(delivery)
    assert (result.status, result.http_status) == ("failed", 401)
    assert result.reason == "access token refused"
    shown = repr(result) + repr(delivery) + str(delivery) + repr(logs) + caplog.text
    shown += repr(NtfyTarget(receiver.url, "t", wrong))
    assert wrong not in shown
    assert logs, "the log channel wrote its line"


@pytest.mark.parametrize(
    ("answer", "status", "retry_after"),
    [
        (NtfyAnswer(429, {"Retry-After": "12"}), "retry", 12.0),
        (NtfyAnswer(429), "retry", None),
        (NtfyAnswer(500), "retry", None),
        (NtfyAnswer(400), "failed", None),
        (NtfyAnswer(404), "failed", None),
        (NtfyAnswer(413), "failed", None),
    ],
    ids=["429-after", "429", "500", "400", "404-not-gone", "413"],
)
async def test_every_answer_of_the_server(  # noqa: PLR0917 - fixtures plus a table row
    session: aiohttp.ClientSession,
    receiver: NtfyReceiver,
    make_delivery: MakeDelivery,
    answer: NtfyAnswer,
    status: str,
    retry_after: float | None,
) -> None:
    receiver.answer(answer)
    result = await channel_for(session, receiver.url).send(make_delivery(target(receiver.url)))
    assert (result.status, result.http_status, result.retry_after) == (
        status,
        answer.status,
        retry_after,
    )


async def test_a_stalled_server_is_a_retry(
    session: aiohttp.ClientSession, receiver: NtfyReceiver, make_delivery: MakeDelivery
) -> None:
    receiver.answer(NtfyAnswer(stall=30))
    started = time.monotonic()
    channel = channel_for(session, receiver.url, timeout=0.3)
    result = await channel.send(make_delivery(target(receiver.url)))
    assert time.monotonic() - started < 5
    assert result.status == "retry"


async def test_a_redirect_is_not_followed(
    session: aiohttp.ClientSession,
    receiver: NtfyReceiver,
    other: NtfyReceiver,
    make_delivery: MakeDelivery,
) -> None:
    receiver.answer(NtfyAnswer(307, redirect_to=other.url + "/"))
    channel = channel_for(session, receiver.url, other.url)
    result = await channel.send(make_delivery(target(receiver.url)))
    assert (result.status, result.http_status) == ("failed", 307)
    sentinel = await channel.send(make_delivery(target(other.url, token=None), title="sentinel"))
    assert sentinel.status == "sent"
    await other.wait_for(1)
    assert [p.message["title"] for p in other.published] == ["sentinel"]
    assert other.other_requests == []


async def test_a_server_no_longer_allowed_is_not_called(
    session: aiohttp.ClientSession, receiver: NtfyReceiver, make_delivery: MakeDelivery
) -> None:
    channel = channel_for(session, "https://ntfy.sh")
    result = await channel.send(make_delivery(target(receiver.url)))
    assert (result.status, result.reason) == ("failed", "server is not an allowed ntfy server")
    assert receiver.published == []


async def test_the_log_channel_always_sends(make_delivery: MakeDelivery) -> None:
    delivery = make_delivery({"channel": "log"})
    with structlog.testing.capture_logs() as logs:
        result = await LogChannel().send(delivery)
    assert result.status == "sent"
    [line] = logs
    assert (line["event"], line["title"], line["mower_id"]) == (
        "notification",
        "Battery low",
        "m-7",
    )
