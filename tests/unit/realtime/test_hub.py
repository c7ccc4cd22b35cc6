"""The hub without a bus: the deny-list at registration and while streams are open."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from mowdeck.authn import Denial, MemoryDenyList
from mowdeck.realtime.buffer import SendBuffer
from mowdeck.realtime.client import Client
from mowdeck.realtime.frames import EVENT_TYPES
from mowdeck.realtime.hub import Hub
from mowdeck.realtime.metrics import RealtimeMetrics

ACCOUNT = uuid.UUID(int=0xA)
MOWER = uuid.UUID(int=1)


def hub(denylist: MemoryDenyList) -> Hub:
    # The bus is only used by start(), which these tests do not call.
    no_bus: Any = None
    return Hub(no_bus, RealtimeMetrics(CollectorRegistry()), denylist)


def client(user: str) -> Client:
    return Client(
        user_id=user,
        account_id=ACCOUNT,
        transport="sse",
        types=EVENT_TYPES,
        requested=None,
        visible=frozenset({MOWER}),
        buffer=SendBuffer(max_events=100, max_lag=30),
    )


def denial(user: str, reason: str) -> Denial:
    return Denial(user_id=user, reason=reason, at=datetime.now(UTC))  # type: ignore[arg-type]


@pytest.mark.parametrize("reason", ["disabled", "deleted"])
async def test_a_stream_registered_after_its_users_denial_is_closed_at_once(reason: str) -> None:
    # The route's check came before its awaits; the denial arrived meanwhile.
    denylist = MemoryDenyList()
    h = hub(denylist)
    await denylist.deny(denial("alice", reason))
    alice, bob = client("alice"), client("bob")
    h.register(alice)
    h.register(bob)
    assert (alice.closed, bob.closed) == (f"user-{reason}", None)
