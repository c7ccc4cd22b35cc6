"""The target API on PostgreSQL: register, list, delete, ownership, the VAPID key, and
the SSRF refusals (each a 422 naming the field and the reason)."""

from __future__ import annotations

import socket
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
import structlog
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from mowdeck.authn import TokenIssuer, TokenVerifier, auth_middleware
from mowdeck.kit.http import problem_middleware
from mowdeck.notifications.delivery.routes import TargetDeps, add_target_routes
from mowdeck.notifications.delivery.targets import TargetPolicy
from mowdeck.notifications.inbox.model import InboxEntry
from mowdeck.notifications.infra import Stores
from tests.integration.notifications.delivery.worker_support import (
    delivery_settings,
    rows,
    worker_for,
)
from tests.support.ntfy_receiver import NtfyReceiver
from tests.support.webpush_receiver import Answer, WebPushReceiver
from tests.unit.notifications.samples import ACCOUNT, AUTH, Clock, at
from tests.unit.notifications.stores import fan_out

ISSUER = TokenIssuer(AUTH)
NTFY = "https://ntfy.mowdeck.example"
SETTINGS = delivery_settings(
    NTFY,
    notifications_push_hosts=["127.0.0.1", "10.1.2.3", "localhost", "push.mowdeck.example"],
)
KEY = "BPublicKeyOfTheApplicationServer"
Client = TestClient[web.Request, web.Application]


# What the tests' names resolve to (there may be no DNS here); IP literals are themselves.
ADDRESSES = {"localhost": "127.0.0.1", "ntfy.mowdeck.example": "93.184.216.34"}


async def getaddrinfo(host: str, port: int, **_: Any) -> list[tuple[Any, ...]]:
    address = ADDRESSES.get(host, host)
    return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]


@pytest.fixture
async def client(stores: Stores) -> AsyncIterator[Client]:
    app = web.Application(middlewares=[problem_middleware, auth_middleware(TokenVerifier(AUTH))])
    add_target_routes(
        app,
        TargetDeps(stores.targets, TargetPolicy.from_settings(SETTINGS), lambda: KEY, getaddrinfo),
    )
    async with TestClient(TestServer(app)) as c:
        yield c


def as_user(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {ISSUER.mint(user, ACCOUNT)}"}


async def post(client: Client, user: str, doc: dict[str, Any]) -> tuple[int, Any]:
    response = await client.post("/v1/notifications/targets", json=doc, headers=as_user(user))
    return response.status, await response.json(content_type=None)


async def test_an_ntfy_target_is_created_without_echoing_its_token(client: Client) -> None:
    doc = {"channel": "ntfy", "server": NTFY, "topic": "lawn", "token": "tk_secret_123"}
    with structlog.testing.capture_logs() as logs:
        status, body = await post(client, "ann", doc)
    assert status == 201
    assert body["channel"] == "ntfy" and body["topic"] == "lawn" and body["token_set"] is True
    assert "tk_secret" not in str(body) and "tk_secret" not in str(logs)
    listed = await client.get("/v1/notifications/targets", headers=as_user("ann"))
    assert (await listed.json())["items"] == [body]


async def test_list_and_delete_and_another_users_target_is_404(
    client: Client, receiver: WebPushReceiver
) -> None:
    status, mine = await post(
        client, "ann", {"channel": "webpush", "subscription": receiver.subscribe().to_json()}
    )
    assert status == 201
    assert mine["subscription"]["endpoint"].startswith(receiver.origin)
    path = f"/v1/notifications/targets/{mine['id']}"
    response = await client.delete(path, headers=as_user("bob"))
    assert response.status == 404
    assert response.content_type == "application/problem+json"
    assert (await client.delete(path, headers=as_user("ann"))).status == 204
    assert (await client.delete(path, headers=as_user("ann"))).status == 404
    bad = await client.delete("/v1/notifications/targets/not-a-uuid", headers=as_user("ann"))
    assert bad.status == 404
    listed = await client.get("/v1/notifications/targets", headers=as_user("ann"))
    assert (await listed.json())["items"] == []


async def test_a_push_endpoint_registered_by_another_user_moves_to_them(
    client: Client, receiver: WebPushReceiver
) -> None:
    doc = {"channel": "webpush", "subscription": receiver.subscribe().to_json()}
    assert (await post(client, "ann", doc))[0] == 201
    status, bobs = await post(client, "bob", doc)
    assert status == 201
    ann = await (await client.get("/v1/notifications/targets", headers=as_user("ann"))).json()
    bob = await (await client.get("/v1/notifications/targets", headers=as_user("bob"))).json()
    assert ann["items"] == []
    assert [t["id"] for t in bob["items"]] == [bobs["id"]]


async def test_the_vapid_public_key(client: Client) -> None:
    response = await client.get(
        "/v1/notifications/webpush/vapid-public-key", headers=as_user("ann")
    )
    assert response.status == 200
    assert await response.json() == {"public_key": KEY}


async def test_a_token_is_required(client: Client) -> None:
    assert (await client.get("/v1/notifications/targets")).status == 401


async def test_a_body_nested_too_deeply_is_a_400_not_a_failure(client: Client) -> None:
    # A thousand levels: the decoder's RecursionError was a 500 with a logged traceback.
    deep = b"[" * 1000 + b"]" * 1000
    with structlog.testing.capture_logs() as logs:
        response = await client.post(
            "/v1/notifications/targets",
            data=deep,
            headers={**as_user("ann"), "Content-Type": "application/json"},
        )
        body = await response.json(content_type=None)
    assert (response.status, body["type"].rsplit("/", 1)[-1]) == (400, "too-deep")
    assert [e for e in logs if e["log_level"] in ("error", "critical")] == []


def _push(endpoint: str) -> dict[str, Any]:
    keys = {
        "p256dh": "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1"
        "XbjhazAkj7I99e8QcYP7DkM",
        "auth": "tBHItJI5svbpez7KI4CCXg",
    }
    return {"channel": "webpush", "subscription": {"endpoint": endpoint, "keys": keys}}


@pytest.mark.parametrize(
    ("doc", "field", "reason"),
    [
        (_push("http://push.mowdeck.example/p/1"), "subscription.endpoint", "https"),
        (_push("https://10.1.2.3/p/1"), "subscription.endpoint", "10.1.2.3 is not public"),
        (_push("https://localhost/p/1"), "subscription.endpoint", "resolves to 127.0.0.1"),
        (_push("https://evil.example/p/1"), "subscription.endpoint", "not an allowed push"),
        (_push("https://user@push.mowdeck.example/p"), "subscription.endpoint", "user info"),
        (
            {"channel": "ntfy", "server": "https://ntfy.evil.example", "topic": "t"},
            "server",
            "not an allowed ntfy server",
        ),
        ({"channel": "ntfy", "server": NTFY, "topic": "a b"}, "topic", "must be 1-64"),
        ({"channel": "email", "address": "x@example.com"}, "channel", "must be one of"),
    ],
    ids=[
        "http",
        "private",
        "loopback",
        "not-allowed",
        "userinfo",
        "ntfy-server",
        "topic",
        "channel",
    ],
)
async def test_refusals_name_the_field_and_the_reason(
    client: Client, doc: dict[str, Any], field: str, reason: str
) -> None:
    status, body = await post(client, "ann", doc)
    assert status == 422, body
    assert body["field"] == field
    assert any(e["field"] == field and reason in e["reason"] for e in body["errors"]), body


async def test_a_redirect_from_a_push_service_is_not_followed(
    client: Client,
    stores: Stores,
    pool: asyncpg.Pool,
    receiver: WebPushReceiver,
) -> None:
    sub = receiver.subscribe()
    async with NtfyReceiver() as internal:
        receiver.answer(sub, Answer(307, redirect_to=internal.url + "/"))
        assert (await post(client, "ann", {"channel": "webpush", "subscription": sub.to_json()}))[
            0
        ] == 201
        await fan_out(stores, "k1", [InboxEntry(user_id="ann")])
        async with worker_for(stores.deliveries, SETTINGS, Clock(at(20_000))) as running:
            await running.worker.run_once()
        assert internal.published == [] and internal.other_requests == []
    [row] = await rows(pool)
    assert (row["state"], row["last_error"]) == ("failed", "redirect not followed")
    assert uuid.UUID((await stores.targets.list_targets("ann"))[0].id.hex)


async def test_targets_come_in_pages_oldest_first(client: Client) -> None:
    made = []
    for n in range(5):
        status, target = await post(
            client,
            "ann",
            {"channel": "ntfy", "server": NTFY, "topic": f"t{n}"},
        )
        assert status == 201, target
        made.append(target["id"])
    seen: list[str] = []
    path = "/v1/notifications/targets?limit=2&unknown=1"
    while True:
        response = await client.get(path, headers=as_user("ann"))
        body = await response.json()
        assert response.status == 200
        assert len(body["items"]) <= 2
        seen += [item["id"] for item in body["items"]]
        if not body["has_more"]:
            assert body["next_after"] is None
            break
        path = f"/v1/notifications/targets?limit=2&after={body['next_after']}"
    assert seen == made
    for query, field in [("limit=0", "limit"), ("limit=1001", "limit"), ("after=e30", "after")]:
        response = await client.get(f"/v1/notifications/targets?{query}", headers=as_user("ann"))
        assert (response.status, (await response.json())["field"]) == (400, field), query
