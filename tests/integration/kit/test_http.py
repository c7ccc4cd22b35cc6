"""Health, readiness, metrics and problem+json on a real server."""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter

from mowdeck.kit.http import (
    Problem,
    Readiness,
    problem_middleware,
    request_metrics,
    task_alive,
    with_ops_routes,
)
from mowdeck.kit.http_server import HttpServer


async def _boom(_: web.Request) -> web.Response:
    raise RuntimeError("secret internals")


async def _teapot(_: web.Request) -> web.Response:
    raise Problem(
        422, "Unprocessable", "`name` is too long", type_="invalid-request", extra={"field": "name"}
    )


async def test_ops_routes_and_problems() -> None:
    registry = CollectorRegistry()
    Counter("demo_things_total", "things", registry=registry).inc(3)
    readiness = Readiness()
    app = web.Application(middlewares=[problem_middleware])
    with_ops_routes(app, readiness, registry)
    app.add_routes([web.get("/boom", _boom), web.post("/v", _teapot)])
    server = HttpServer(app, "127.0.0.1", 0)
    await server.start()
    try:
        async with aiohttp.ClientSession(server.url) as http:
            async with http.get("/healthz") as r:
                assert r.status == 200
            async with http.get("/readyz") as r:
                body = await r.json(content_type=None)
                assert r.content_type == "application/problem+json"
                assert (r.status, body["reason"]) == (503, "starting")
            readiness.set_ready()
            async with http.get("/readyz") as r:
                assert r.status == 200
            readiness.set_not_ready("shutting down")
            async with http.get("/readyz") as r:
                body = await r.json(content_type=None)
                assert (r.status, body["reason"]) == (503, "shutting down")
            async with http.get("/metrics") as r:
                assert "demo_things_total 3.0" in await r.text()
            async with http.get("/boom") as r:
                body = await r.json(content_type=None)
                assert r.status == 500
                assert r.content_type == "application/problem+json"
                assert "secret" not in str(body)
            async with http.post("/v") as r:
                body = await r.json(content_type=None)
                assert (r.status, body["field"], body["detail"]) == (
                    422,
                    "name",
                    "`name` is too long",
                )
                assert body["type"].endswith("/invalid-request")
            async with http.get("/nowhere") as r:
                assert (r.status, r.content_type) == (404, "application/problem+json")
            async with http.delete("/healthz") as r:
                assert r.status == 405
                assert r.headers["Allow"]
    finally:
        await server.stop()


async def test_healthz_fails_naming_a_watched_part_that_died_while_running() -> None:
    readiness = Readiness()
    app = web.Application(middlewares=[problem_middleware])
    with_ops_routes(app, readiness, CollectorRegistry())
    worker = asyncio.create_task(asyncio.sleep(3600), name="worker")
    readiness.watch("worker", task_alive(lambda: worker))
    readiness.watch("probe that raises", lambda: 1 / 0 == 0)
    readiness.watch("fine", lambda: True)
    server = HttpServer(app, "127.0.0.1", 0)
    await server.start()
    try:
        async with aiohttp.ClientSession(server.url) as http:
            readiness.set_ready()
            async with http.get("/healthz") as r:
                assert (r.status, (await r.json())["failed"]) == (503, ["probe that raises"])
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)
            async with http.get("/healthz") as r:
                body = await r.json()
                assert (r.status, body["status"]) == (503, "failed")
                assert body["failed"] == ["worker", "probe that raises"]
            # Stopping takes parts down on purpose: that is no failure.
            readiness.set_not_ready("shutting down")
            async with http.get("/healthz") as r:
                assert r.status == 200
    finally:
        await server.stop()


async def test_request_metrics_count_every_answer_by_route_pattern_and_status() -> None:
    registry = CollectorRegistry()
    app = web.Application(
        middlewares=[request_metrics(registry, service="demo"), problem_middleware]
    )
    app.add_routes([web.post("/v/{name}", _teapot), web.get("/boom", _boom)])
    server = HttpServer(app, "127.0.0.1", 0)
    await server.start()
    try:
        async with aiohttp.ClientSession(server.url) as http:
            for path in ("/v/a", "/v/b"):
                async with http.post(path) as r:
                    assert r.status == 422
            async with http.get("/nowhere") as r:
                assert r.status == 404
    finally:
        await server.stop()

    def requests(route: str, status: str, method: str) -> float | None:
        labels = {"route": route, "method": method, "status": status}
        return registry.get_sample_value("mowdeck_demo_http_requests_total", labels)

    assert requests("/v/{name}", "422", "POST") == 2
    assert requests("unmatched", "404", "GET") == 1
    count = "mowdeck_demo_http_request_duration_seconds_count"
    assert registry.get_sample_value(count, {"route": "/v/{name}"}) == 2
