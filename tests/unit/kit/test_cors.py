"""CORS: only the configured origins may call the API from a browser."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from mowdeck.authn import AuthSettings, TokenVerifier, auth_middleware
from mowdeck.kit.cors import CorsPolicy
from mowdeck.kit.http import problem_middleware

CONSOLE = "http://127.0.0.1:8084"
AUTH = AuthSettings(jwt_secret="cors-tests-secret-0123456789abcdef-0123")


async def hello(_: web.Request) -> web.Response:
    return web.json_response({"hello": "world"})


async def events(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(b"data: 1\n\n")
    return response


@pytest.fixture
async def client() -> AsyncIterator[TestClient[web.Request, web.Application]]:
    # As the services build their apps: authentication behind, the policy installed after.
    app = web.Application(
        middlewares=[
            problem_middleware,
            auth_middleware(TokenVerifier(AUTH), public_paths=("/v1/events",)),
        ]
    )
    CorsPolicy([CONSOLE + "/"]).install(app)
    app.router.add_put("/v1/hello", hello)
    app.router.add_get("/v1/events", events)
    async with TestClient(TestServer(app)) as c:
        yield c


async def test_a_configured_origin_passes_the_preflight_without_a_token(
    client: TestClient[web.Request, web.Application],
) -> None:
    response = await client.options(
        "/v1/hello",
        headers={
            "Origin": CONSOLE,
            "Access-Control-Request-Method": "PUT",
            "Access-Control-Request-Headers": "authorization, content-type",
        },
    )
    assert response.status == 204
    assert response.headers["Access-Control-Allow-Origin"] == CONSOLE
    assert "PUT" in response.headers["Access-Control-Allow-Methods"]
    assert "Authorization" in response.headers["Access-Control-Allow-Headers"]


async def test_a_configured_origin_may_read_answers_errors_and_streams(
    client: TestClient[web.Request, web.Application],
) -> None:
    refused = await client.put("/v1/hello", headers={"Origin": CONSOLE})
    missing = await client.get("/v1/nothing", headers={"Origin": CONSOLE})
    stream = await client.get("/v1/events", headers={"Origin": CONSOLE})
    assert refused.status == 401
    assert refused.headers["Access-Control-Allow-Origin"] == CONSOLE
    assert "Retry-After" in refused.headers["Access-Control-Expose-Headers"]
    assert missing.status == 404
    assert missing.headers["Access-Control-Allow-Origin"] == CONSOLE
    assert stream.headers["Access-Control-Allow-Origin"] == CONSOLE
    assert await stream.read() == b"data: 1\n\n"


@pytest.mark.parametrize("origin", ["http://evil.example", "http://127.0.0.1:9999", "null"])
async def test_another_origin_is_refused_the_preflight_and_gets_no_cors_headers(
    client: TestClient[web.Request, web.Application], origin: str
) -> None:
    pre = await client.options(
        "/v1/hello", headers={"Origin": origin, "Access-Control-Request-Method": "PUT"}
    )
    put = await client.put("/v1/hello", headers={"Origin": origin})
    assert pre.status == 403
    assert "Access-Control-Allow-Origin" not in pre.headers
    assert "Access-Control-Allow-Methods" not in pre.headers
    assert put.status == 401
    assert "Access-Control-Allow-Origin" not in put.headers
    assert put.headers["Vary"] == "Origin"


async def test_a_plain_options_request_is_not_a_preflight(
    client: TestClient[web.Request, web.Application],
) -> None:
    # Without Access-Control-Request-Method it is the route's business: no OPTIONS route.
    response = await client.options("/v1/hello", headers={"Origin": CONSOLE})
    assert response.status == 405


def test_any_origin_with_a_star() -> None:
    policy = CorsPolicy(["*"])
    assert policy.allows("http://anything.example")
    assert not CorsPolicy([]).allows("http://anything.example")
