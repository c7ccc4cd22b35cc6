"""The shared session refuses names resolving to internal addresses on every connection."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from mowdeck.notifications.delivery.channels import ChannelSettings, open_channel_session
from mowdeck.notifications.delivery.channels.http import post
from mowdeck.notifications.delivery.channels.ntfy import ntfy_answer
from mowdeck.notifications.delivery.targets import ForbiddenAddressError
from tests.support.ntfy_receiver import NtfyReceiver


@pytest.fixture
async def receiver() -> AsyncIterator[NtfyReceiver]:
    async with NtfyReceiver() as r:
        yield r


async def test_localhost_is_refused_when_not_insecure(receiver: NtfyReceiver) -> None:
    # What a name that passed validation and now resolves to 127.0.0.1 (rebinding) meets.
    url = receiver.url.replace("127.0.0.1", "localhost")
    session = open_channel_session(ChannelSettings(notifications_insecure_hosts=["127.0.0.1"]))
    async with session:
        with pytest.raises(aiohttp.ClientConnectorError) as info:
            await session.post(url + "/", data=b"{}")
        assert isinstance(info.value.os_error, ForbiddenAddressError)
        result = await post(
            session,
            url + "/",
            data=b"{}",
            headers={},
            timeout=2,
            answer=lambda s, h: ntfy_answer(s, h, 0),
        )
    assert result.status == "failed"
    assert result.reason.startswith("refused: localhost resolves to")
    # Sentinel: the receiver answers a direct request, and nothing else reached it.
    async with (
        aiohttp.ClientSession() as plain,
        plain.get(receiver.url + "/sentinel") as response,
    ):
        assert response.status == 200
    assert receiver.other_requests == ["GET /sentinel"]
    assert receiver.published == []


async def test_localhost_passes_when_listed_as_insecure(receiver: NtfyReceiver) -> None:
    url = receiver.url.replace("127.0.0.1", "localhost")
    session = open_channel_session(ChannelSettings(notifications_insecure_hosts=["localhost"]))
    async with session, session.post(url + "/", json={"topic": "t"}) as response:
        assert response.status == 200
    assert len(receiver.published) == 1
