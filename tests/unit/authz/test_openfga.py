"""The OpenFGA adapter against a local stand-in that speaks the few endpoints it uses.

No OpenFGA server installs here: the stand-in answers from the local evaluator and records
every request, so these tests check the HTTP the adapter sends, not the real server.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from mowdeck.authz import (
    AuthzSettings,
    AuthzUnavailableError,
    InMemoryTupleStore,
    InvalidTupleError,
    LocalAuthorizer,
    OpenFgaAuthorizer,
    Tuple,
    build_authorizer,
    grant_tuples,
    mower_object,
    user_ref,
)

STORE = "01HVMMBCMGZNT3SED4Z17ECXCA"
MODEL = "01HVMMBCMGZNT3SED4Z17ECXCB"
TOKEN = "fga-secret"
ACCOUNT = uuid.UUID("0000000a-0000-4000-8000-00000000000a")
MOWER = uuid.UUID("a1000000-0000-4000-8000-000000000001")


@dataclass
class FakeOpenFga:
    """Records requests; answers from a LocalAuthorizer on an in-memory store."""

    engine: LocalAuthorizer = field(default_factory=lambda: LocalAuthorizer(InMemoryTupleStore()))
    requests: list[tuple[str, dict[str, Any], str | None]] = field(default_factory=list)
    fail_with: int | None = None

    def app(self) -> web.Application:
        app = web.Application()
        for name in ("check", "batch-check", "list-objects", "write", "read"):
            app.router.add_post(f"/stores/{{store}}/{name}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        name = request.path.rsplit("/", 1)[-1]
        self.requests.append((name, body, request.headers.get("Authorization")))
        assert request.match_info["store"] == STORE
        if self.fail_with:
            return web.json_response({"code": "x", "message": "boom"}, status=self.fail_with)
        answer = await getattr(self, name.replace("-", "_"))(body)
        return web.json_response(answer)

    async def check(self, body: dict[str, Any]) -> dict[str, Any]:
        key = body["tuple_key"]
        return {"allowed": await self.engine.check(key["user"], key["relation"], key["object"])}

    async def batch_check(self, body: dict[str, Any]) -> dict[str, Any]:
        result = {}
        for item in body["checks"]:
            key = item["tuple_key"]
            allowed = await self.engine.check(key["user"], key["relation"], key["object"])
            result[item["correlation_id"]] = {"allowed": allowed}
        return {"result": result}

    async def list_objects(self, body: dict[str, Any]) -> dict[str, Any]:
        found = await self.engine.list_objects(body["user"], body["relation"], body["type"])
        return {"objects": sorted(found)}

    async def write(self, body: dict[str, Any]) -> dict[str, Any]:
        def tuples(part: str) -> list[Tuple]:
            keys = (body.get(part) or {}).get("tuple_keys") or []
            return [Tuple(k["user"], k["relation"], k["object"]) for k in keys]

        await self.engine.write(tuples("writes"), tuples("deletes"))
        return {}

    async def read(self, body: dict[str, Any]) -> dict[str, Any]:
        key = body.get("tuple_key") or {}
        found = await self.engine.read(
            user=key.get("user"), relation=key.get("relation"), object=key.get("object")
        )
        start = int(body.get("continuation_token") or 0)
        size = int(body.get("page_size") or 100)
        page = found[start : start + size]
        more = start + size < len(found)
        return {
            "tuples": [
                {
                    "key": {"user": t.user, "relation": t.relation, "object": t.object},
                    "timestamp": "2026-01-01T00:00:00Z",
                }
                for t in page
            ],
            "continuation_token": str(start + size) if more else "",
        }


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeOpenFga, OpenFgaAuthorizer]]:
    server = FakeOpenFga()
    test_server = TestServer(server.app())
    await test_server.start_server()
    settings = AuthzSettings(
        authz="openfga",
        openfga_api_url=str(test_server.make_url("")).rstrip("/"),
        openfga_store_id=STORE,
        openfga_model_id=MODEL,
        openfga_api_token=TOKEN,
    )
    authorizer = build_authorizer(settings, None)
    assert isinstance(authorizer, OpenFgaAuthorizer)
    yield server, authorizer
    await authorizer.close()
    await test_server.close()


async def test_write_sends_one_idempotent_transaction(
    fake: tuple[FakeOpenFga, OpenFgaAuthorizer],
) -> None:
    server, authorizer = fake
    await authorizer.write(grant_tuples(ACCOUNT, "olga", "admin"))
    name, body, auth = server.requests[-1]
    assert (name, auth) == ("write", f"Bearer {TOKEN}")
    assert body["authorization_model_id"] == MODEL
    assert body["writes"]["on_duplicate"] == "ignore"
    assert len(body["writes"]["tuple_keys"]) == 2
    assert "deletes" not in body or body["deletes"] is None


async def test_check_and_list_objects_follow_the_grants(
    fake: tuple[FakeOpenFga, OpenFgaAuthorizer],
) -> None:
    server, authorizer = fake
    await authorizer.write(
        [
            Tuple(f"account:{ACCOUNT}", "account", mower_object(MOWER)),
            *grant_tuples(ACCOUNT, "vera", "viewer"),
        ]
    )
    assert await authorizer.check(user_ref("vera"), "can_view", mower_object(MOWER))
    assert not await authorizer.check(user_ref("vera"), "can_operate", mower_object(MOWER))
    name, body, _ = server.requests[-1]
    assert name == "check"
    assert body["tuple_key"] == {
        "user": "user:vera",
        "relation": "can_operate",
        "object": mower_object(MOWER),
    }
    assert body["authorization_model_id"] == MODEL
    assert await authorizer.list_objects(user_ref("vera"), "can_view", "mower") == {
        mower_object(MOWER)
    }
    assert server.requests[-1][0] == "list-objects"


async def test_check_many_is_one_batch_check_request(
    fake: tuple[FakeOpenFga, OpenFgaAuthorizer],
) -> None:
    server, authorizer = fake
    await authorizer.write(
        [
            Tuple(f"account:{ACCOUNT}", "account", mower_object(MOWER)),
            *grant_tuples(ACCOUNT, "vera", "viewer"),
        ]
    )
    users = [user_ref("vera"), *(user_ref(f"u{i}") for i in range(30))]
    before = len(server.requests)
    answers = await authorizer.check_many(users, "can_view", mower_object(MOWER))
    assert answers == {u: u == user_ref("vera") for u in users}
    sent = server.requests[before:]
    assert [name for name, _, _ in sent] == ["batch-check"]
    assert len(sent[0][1]["checks"]) == len(users)


async def test_check_pairs_is_one_batch_check_request(
    fake: tuple[FakeOpenFga, OpenFgaAuthorizer],
) -> None:
    server, authorizer = fake
    other = uuid.uuid4()
    await authorizer.write(
        [
            Tuple(f"account:{ACCOUNT}", "account", mower_object(MOWER)),
            Tuple(f"account:{ACCOUNT}", "account", mower_object(other)),
            *grant_tuples(ACCOUNT, "vera", "viewer"),
        ]
    )
    pairs = [(user_ref(u), mower_object(m)) for u in ("vera", "bob") for m in (MOWER, other)]
    before = len(server.requests)
    answers = await authorizer.check_pairs(pairs, "can_view")
    assert answers == {p: p[0] == user_ref("vera") for p in pairs}
    assert [name for name, _, _ in server.requests[before:]] == ["batch-check"]


async def test_read_pages_and_delete_object(fake: tuple[FakeOpenFga, OpenFgaAuthorizer]) -> None:
    server, authorizer = fake
    tuples = [Tuple(user_ref(f"u{i:03}"), "viewer", "group:big") for i in range(150)]
    await authorizer.write(tuples[:100])
    await authorizer.write(tuples[100:])
    assert await authorizer.read(object="group:big") == sorted(
        tuples, key=lambda t: (t.object, t.relation, t.user)
    )
    assert sum(1 for name, _, _ in server.requests if name == "read") == 2
    assert await authorizer.delete_object("group:big") == 150
    assert await authorizer.read(object="group:big") == []


@pytest.mark.parametrize(
    ("status", "error"),
    [(400, InvalidTupleError), (500, AuthzUnavailableError)],
    ids=["400-invalid", "500-unavailable"],
)
async def test_server_errors_are_translated(
    fake: tuple[FakeOpenFga, OpenFgaAuthorizer], status: int, error: type[Exception]
) -> None:
    server, authorizer = fake
    server.fail_with = status
    with pytest.raises(error):
        await authorizer.check(user_ref("a"), "can_view", mower_object(MOWER))


async def test_unreachable_server_is_unavailable() -> None:
    settings = AuthzSettings(
        authz="openfga", openfga_api_url="http://127.0.0.1:9", openfga_store_id=STORE
    )
    authorizer = build_authorizer(settings, None)
    try:
        with pytest.raises(AuthzUnavailableError):
            await authorizer.check(user_ref("a"), "can_view", mower_object(MOWER))
    finally:
        await authorizer.close()
