"""``kit.http_server``: what the parser refuses, the Server header, and a disconnect
cancelling a query (safe methods only) on a real server and a real PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import aiohttp
import asyncpg
import pytest
import structlog
from aiohttp import web

from mowdeck.kit.http import problem_middleware
from mowdeck.kit.http_server import HttpServer
from tests.support.eventually import eventually

TOKEN = "eyJhbGciOiJIUzI1NiJ9." + "a" * 9000 + ".c2lnbmF0dXJl"


async def _ok(_: web.Request) -> web.Response:
    return web.json_response({"ok": True})


@contextlib.asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[HttpServer]:
    server = HttpServer(app, "127.0.0.1", 0)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def _app() -> web.Application:
    app = web.Application(middlewares=[problem_middleware])
    app.add_routes([web.get("/ok", _ok)])
    return app


async def test_a_header_too_long_is_a_problem_that_echoes_nothing_and_logs_one_line() -> None:
    async with serving(_app()) as server, aiohttp.ClientSession() as http:
        with structlog.testing.capture_logs() as logs:
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with http.get(f"{server.url}/ok", headers=headers) as r:
                body = await r.read()
                assert (r.status, r.content_type) == (400, "application/problem+json")
                assert r.headers["Server"] == "Mowdeck"
        doc = json.loads(body)
        assert doc["type"].endswith("/bad-http-request")
        assert "longer than this server accepts" in doc["detail"]
        assert b"aaaa" not in body and b"Bearer" not in body
        refused = [e for e in logs if e["event"] == "request refused by the HTTP parser"]
        assert len(refused) == 1, logs
        assert refused[0]["error"] == "LineTooLong"
        assert "aaaa" not in repr(logs)
        assert all("exc_info" not in e for e in logs)


async def test_a_request_that_is_not_http_is_a_problem() -> None:
    async with serving(_app()) as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            writer.write(b"GET /ok HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n")
            await writer.drain()
            answer = await asyncio.wait_for(reader.read(), 5)
        finally:
            writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b" ", 2)[1] == b"400"
    assert b"Content-Type: application/problem+json" in head
    assert b"Server: Mowdeck" in head
    assert json.loads(body)["status"] == 400


async def test_every_answer_names_the_server_without_versions() -> None:
    async with serving(_app()) as server, aiohttp.ClientSession() as http:
        for path in ("/ok", "/nowhere"):
            async with http.get(server.url + path) as r:
                assert r.headers["Server"] == "Mowdeck", path


async def _active(pool: asyncpg.Pool, marker: str) -> int:
    found: int = await pool.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE $1",
        f"%{marker}%",
    )
    return found


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    p = await asyncpg.create_pool(database_url, min_size=1, max_size=4)
    try:
        yield p
    finally:
        await p.close()


async def test_a_client_leaving_cancels_its_query_in_the_database(pool: asyncpg.Pool) -> None:
    cancelled = asyncio.Event()

    async def slow(_: web.Request) -> web.Response:
        try:
            await pool.execute("SELECT pg_sleep(60) /* left-behind */")
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return web.json_response({})

    app = _app()
    app.add_routes([web.get("/slow", slow)])
    async with serving(app) as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        await eventually(lambda: _active(pool, "left-behind"), what="the query running")
        writer.close()  # the viewer goes away
        await asyncio.wait_for(cancelled.wait(), 10)
        # PostgreSQL stopped the statement: it no longer runs for nobody.
        await eventually(lambda: _stopped(pool, "left-behind"), what="the query cancelled")
        del reader


async def _stopped(pool: asyncpg.Pool, marker: str) -> bool:
    return await _active(pool, marker) == 0


async def test_a_client_leaving_does_not_cut_short_what_changes_state() -> None:
    loop = asyncio.get_running_loop()
    started: asyncio.Future[web.Request] = loop.create_future()
    release = asyncio.Event()
    done: asyncio.Future[str] = loop.create_future()

    async def change(request: web.Request) -> web.Response:
        started.set_result(request)
        await release.wait()  # the client is gone by now
        done.set_result("stored")
        return web.json_response({}, status=201)

    app = _app()
    app.add_routes([web.post("/change", change)])
    async with serving(app) as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"POST /change HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        request = await asyncio.wait_for(started, 5)
        writer.close()
        # The server has seen the connection end (and cancelled the request's task).
        await eventually(lambda: request.transport is None, what="the connection lost")
        release.set()
        assert await asyncio.wait_for(done, 5) == "stored"
        del reader
