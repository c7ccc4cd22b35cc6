"""The shared deny-list: a disabled or deleted user gets no ticket and no stream."""

from __future__ import annotations

import aiohttp
import msgspec
import pytest

from mowdeck.authn import Denial, TokenIssuer
from mowdeck.authn._denylist import key_of
from mowdeck.kit.bus import Bus
from mowdeck.realtime.service import RealtimeService
from tests.integration.realtime.conftest import (
    ACCOUNT,
    AUTH,
    Opener,
    ServiceFactory,
    now,
)


async def _deny(bus: Bus, user: str, reason: str = "disabled") -> None:
    """Write the user into the bucket, as another service's recorder does."""
    kv = await bus.js.key_value(AUTH.denylist_bucket)
    denial = Denial(user_id=user, reason=reason, at=now())  # type: ignore[arg-type]
    await kv.put(key_of(user), msgspec.json.encode(denial))


async def _ticket(
    http: aiohttp.ClientSession, service: RealtimeService, token: str
) -> tuple[int, dict[str, object]]:
    async with http.post(
        f"{service.url}/v1/stream/tickets", headers={"Authorization": f"Bearer {token}"}
    ) as response:
        body: dict[str, object] = await response.json()
        return response.status, body


async def _stream(
    http: aiohttp.ClientSession, service: RealtimeService, path: str, token: str | None = None
) -> tuple[int, dict[str, object]]:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with http.get(f"{service.url}{path}", headers=headers) as response:
        if response.status != 401:
            return response.status, {}
        body: dict[str, object] = await response.json()
        return response.status, body


@pytest.mark.parametrize("reason", ["disabled", "deleted"])
async def test_a_replica_started_after_the_denial_refuses_tickets_and_streams(
    bus: Bus,
    make_service: ServiceFactory,
    http: aiohttp.ClientSession,
    issuer: TokenIssuer,
    reason: str,
) -> None:
    await _deny(bus, "alice", reason)
    service = await make_service()
    token = issuer.mint("alice", ACCOUNT)
    status, body = await _ticket(http, service, token)
    # What Fleet answers a denied user: 401 with reason "disabled" for both events.
    assert (status, body["reason"], body["type"]) == (
        401,
        "disabled",
        "https://mowdeck.dev/problems/unauthenticated",
    )
    for path in ("/v1/stream", "/v1/ws"):
        status, body = await _stream(http, service, path, token)
        assert (status, body.get("reason")) == (401, "disabled"), path
    # Bob is not on the list: his ticket and stream work on the same replica.
    status, body = await _ticket(http, service, issuer.mint("bob", ACCOUNT))
    assert status == 201
    status, _ = await _stream(http, service, f"/v1/stream?ticket={body['ticket']}")
    assert status == 200
    assert service.metrics.refused.labels("blocked")._value.get() == 2


async def test_a_ticket_issued_before_the_denial_opens_no_stream_after_it(
    bus: Bus,
    make_service: ServiceFactory,
    open_stream: Opener,
    http: aiohttp.ClientSession,
    issuer: TokenIssuer,
) -> None:
    service = await make_service()
    token = issuer.mint("alice", ACCOUNT)
    status, body = await _ticket(http, service, token)
    assert status == 201
    ticket = body["ticket"]
    reader = await open_stream(service, "alice")
    await reader.next()
    await _deny(bus, "alice", "deleted")
    # The open stream is closed with the denial's reason ...
    rest = await reader.ended()
    assert [e.type for e in rest if e.type != "heartbeat"] == ["close"]
    assert rest[-1].data["reason"] == "user-deleted"
    # ... and the ticket issued before it opens nothing, on this replica or a new one.
    later = await make_service()
    status, body = await _stream(http, later, f"/v1/stream?ticket={ticket}")
    assert (status, body.get("reason")) == (401, "disabled")
    status, body = await _stream(http, service, f"/v1/stream?ticket={ticket}")
    assert status == 401
