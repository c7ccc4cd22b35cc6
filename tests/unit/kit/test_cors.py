"""CORS: only the configured origins may call the API from a browser."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from mowdeck.kit.http import cors_middleware, problem_middleware

CONSOLE = "http://127.0.0.1:8084"


async def hello(_: web.Request) -> web.Response:
    return web.json_response({"hello": "world"})


@pytest.fixture
async def client() -> AsyncIterator[TestClient[web.Request, web.Application]]:
    app = web.Application(middlewares=[cors_middleware([CONSOLE + "/"]), problem_middleware])
    app.router.add_post("/v1/hello", hello)
    async with TestClient(TestServer(app)) as c:
        yield c


async def test_a_configured_origin_passes_the_preflight_without_a_token(
    client: TestClient[web.Request, web.Application],
) -> None:
    response = await client.options(
        "/v1/hello",
        headers={"Origin": CONSOLE, "Access-Control-Request-Method": "POST"},
    )
    assert response.status == 204
    assert response.headers["Access-Control-Allow-Origin"] == CONSOLE
    assert "Authorization" in response.headers["Access-Control-Allow-Headers"]


async def test_a_configured_origin_may_read_answers_and_errors(
    client: TestClient[web.Request, web.Application],
) -> None:
    ok = await client.post("/v1/hello", headers={"Origin": CONSOLE})
    missing = await client.get("/v1/nothing", headers={"Origin": CONSOLE})
    assert ok.headers["Access-Control-Allow-Origin"] == CONSOLE
    assert missing.status == 404
    assert missing.headers["Access-Control-Allow-Origin"] == CONSOLE


@pytest.mark.parametrize("origin", ["http://evil.example", "http://127.0.0.1:9999"])
async def test_another_origin_gets_no_cors_headers(
    client: TestClient[web.Request, web.Application], origin: str
) -> None:
    pre = await client.options(
        "/v1/hello", headers={"Origin": origin, "Access-Control-Request-Method": "POST"}
    )
    post = await client.post("/v1/hello", headers={"Origin": origin})
    assert "Access-Control-Allow-Origin" not in pre.headers
    assert pre.status == 405
    assert "Access-Control-Allow-Origin" not in post.headers
