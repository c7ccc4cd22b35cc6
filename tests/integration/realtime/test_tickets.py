"""Tickets: single use across replicas, short-lived, and never a token in a URL."""

from __future__ import annotations

import asyncio
import uuid

import aiohttp
import pytest

from mowdeck.authn import TokenIssuer
from tests.integration.realtime.conftest import ACCOUNT, ServiceFactory, SseReader


async def _ticket(http: aiohttp.ClientSession, url: str, token: str) -> str:
    async with http.post(
        f"{url}/v1/stream/tickets", headers={"Authorization": f"Bearer {token}"}
    ) as response:
        assert response.status == 201
        body = await response.json()
    ticket: str = body["ticket"]
    return ticket


async def test_a_ticket_opens_one_stream_once_across_replicas(
    make_service: ServiceFactory, http: aiohttp.ClientSession, issuer: TokenIssuer
) -> None:
    one, two = await make_service(), await make_service()
    token = issuer.mint("alice", ACCOUNT)
    ticket = await _ticket(http, one.url, token)
    assert token not in ticket and "." not in ticket
    response = await http.get(f"{two.url}/v1/stream?ticket={ticket}")
    assert response.status == 200
    reader = SseReader(response)
    assert (await reader.next()).type == "snapshot"
    await reader.close()
    for service in (one, two):
        async with http.get(f"{service.url}/v1/stream?ticket={ticket}") as again:
            assert again.status == 401
            assert (await again.json())["reason"] == "ticket-used"


async def test_a_ticket_expires(
    make_service: ServiceFactory, http: aiohttp.ClientSession, issuer: TokenIssuer
) -> None:
    service = await make_service(
        realtime_ticket_ttl_seconds=0.3, realtime_ticket_bucket="realtime-tickets-short"
    )
    ticket = await _ticket(http, service.url, issuer.mint("alice", ACCOUNT))
    await asyncio.sleep(0.5)
    async with http.get(f"{service.url}/v1/stream?ticket={ticket}") as response:
        assert response.status == 401
        assert (await response.json())["reason"] in ("ticket-expired", "ticket-unknown")


async def test_a_websocket_opens_with_a_ticket(
    make_service: ServiceFactory, http: aiohttp.ClientSession, issuer: TokenIssuer
) -> None:
    service = await make_service()
    ticket = await _ticket(http, service.url, issuer.mint("alice", ACCOUNT))
    async with http.ws_connect(f"{service.url}/v1/ws?ticket={ticket}") as ws:
        first = await ws.receive_json(timeout=5)
        assert set(first) == {"id", "type", "data"}
        assert first["type"] == "snapshot"


async def test_a_request_that_is_no_websocket_upgrade_leaves_its_ticket_unused(
    make_service: ServiceFactory, http: aiohttp.ClientSession, issuer: TokenIssuer
) -> None:
    service = await make_service()
    ticket = await _ticket(http, service.url, issuer.mint("alice", ACCOUNT))
    async with http.get(f"{service.url}/v1/ws?ticket={ticket}") as plain:
        assert plain.status == 400
        assert (await plain.json())["type"].endswith("not-websocket")
    async with http.ws_connect(f"{service.url}/v1/ws?ticket={ticket}") as ws:
        assert (await ws.receive_json(timeout=5))["type"] == "snapshot"


@pytest.mark.parametrize("param", ["access_token", "token", "jwt"])
async def test_a_token_in_the_url_is_refused(
    make_service: ServiceFactory, http: aiohttp.ClientSession, issuer: TokenIssuer, param: str
) -> None:
    service = await make_service()
    token = issuer.mint("alice", ACCOUNT)
    async with http.get(f"{service.url}/v1/stream?{param}={token}") as response:
        assert response.status == 400
        body = await response.json()
        assert body["type"].endswith("token-in-url")
        assert token not in await response.text()


async def test_a_token_given_as_a_ticket_is_refused(
    make_service: ServiceFactory, http: aiohttp.ClientSession, issuer: TokenIssuer
) -> None:
    service = await make_service()
    token = issuer.mint("alice", ACCOUNT)
    async with http.get(f"{service.url}/v1/stream?ticket={token}") as response:
        assert response.status == 400


@pytest.mark.parametrize("ticket", ["", "x", "a" * 40, str(uuid.uuid4())])
async def test_an_unknown_ticket_is_unauthenticated(
    make_service: ServiceFactory, http: aiohttp.ClientSession, ticket: str
) -> None:
    service = await make_service()
    async with http.get(f"{service.url}/v1/stream?ticket={ticket}") as response:
        assert response.status == 401


async def test_no_credentials_at_all_is_unauthenticated(
    make_service: ServiceFactory, http: aiohttp.ClientSession
) -> None:
    service = await make_service()
    for path in ("/v1/stream", "/v1/ws", "/v1/stream/tickets"):
        method = http.post if path.endswith("tickets") else http.get
        async with method(f"{service.url}{path}") as response:
            assert response.status == 401, path
