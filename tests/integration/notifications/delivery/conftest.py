"""What the delivery's integration tests share: a local push service."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.webpush_receiver import WebPushReceiver


@pytest.fixture
async def receiver() -> AsyncIterator[WebPushReceiver]:
    """A push service on 127.0.0.1 that checks VAPID and decrypts what it receives."""
    async with WebPushReceiver() as r:
        yield r
