"""A limit at the HTTP edge: 429 problem+json with Retry-After, the metric, the key."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

from mowdeck.kit.http import PROBLEM_CONTENT_TYPE, Problem, problem_middleware
from mowdeck.kit.ratelimit import (
    Limit,
    MemoryLimiter,
    RateLimit,
    RateLimitMetrics,
    RequestLimit,
    rate_limited,
)


@pytest.mark.parametrize(
    ("retry_after", "header"),
    [(0.02, "1"), (1.0, "1"), (1.0001, "2"), (59.5, "60"), (1e-9, "1")],
    ids=["a fraction is a whole second", "exactly one", "just over one", "rounded up", "tiny"],
)
def test_retry_after_is_whole_seconds_rounded_up(retry_after: float, header: str) -> None:
    problem = rate_limited("commands_per_user", retry_after, "too many commands")
    assert problem.status == 429
    assert problem.headers == {"Retry-After": header}
    body = problem.body("/v1/x")
    assert body["type"] == "https://mowdeck.dev/problems/rate-limited"
    assert body["limit"] == "commands_per_user"
    assert body["retry_after"] == int(header)
    assert body["detail"] == f"too many commands; retry in {header} s"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def limit_of(
    limit: Limit, registry: CollectorRegistry, clock: Clock, buckets: MemoryLimiter | None = None
) -> RateLimit:
    return RateLimit(
        "things_per_user",
        limit,
        buckets or MemoryLimiter(),
        RateLimitMetrics(registry, service="test"),
        what="things from this user",
        clock=clock,
    )


async def test_a_refusal_names_the_limit_and_counts_it() -> None:
    registry, clock = CollectorRegistry(), Clock()
    things = limit_of(Limit(rate=0.5, burst=2), registry, clock)
    await things.check("alice")
    await things.check("alice")
    with pytest.raises(Problem) as refused:
        await things.check("alice")
    assert refused.value.headers == {"Retry-After": "2"}
    assert refused.value.detail == (
        "too many things from this user: at most 0.5 a second, 2 at once; retry in 2 s"
    )
    await things.check("bob")  # a bucket per key
    sample = registry.get_sample_value(
        "mowdeck_test_rate_limited_total", {"limit": "things_per_user"}
    )
    assert sample == 1
    clock.now += 2
    await things.check("alice")


async def test_a_rate_of_zero_turns_the_limit_off() -> None:
    buckets = MemoryLimiter()
    off = limit_of(Limit(rate=0, burst=1), CollectorRegistry(), Clock(), buckets)
    for _ in range(100):
        await off.check("alice")
    assert len(buckets) == 0


async def test_limits_sharing_a_limiter_keep_buckets_of_their_own() -> None:
    registry, clock, shared = CollectorRegistry(), Clock(), MemoryLimiter()
    metrics = RateLimitMetrics(registry, service="test")
    one = RateLimit("one", Limit(1, 1), shared, metrics, what="ones", clock=clock)
    two = RateLimit("two", Limit(1, 1), shared, metrics, what="twos", clock=clock)
    await one.check("alice")
    await two.check("alice")


@pytest.fixture
async def client() -> AsyncIterator[TestClient[web.Request, web.Application]]:
    registry = CollectorRegistry()
    things = limit_of(Limit(rate=0.001, burst=2), registry, Clock())
    by_header = RequestLimit(things, lambda r: r.headers.get("X-Who", ""))

    async def hello(_: web.Request) -> web.Response:
        return web.json_response({"hello": True})

    app = web.Application(middlewares=[problem_middleware])
    app.router.add_post("/things", by_header.guard(hello))
    async with TestClient(TestServer(app)) as c:
        yield c


async def test_a_guarded_route_answers_429_problem_json_past_the_burst(
    client: TestClient[web.Request, web.Application],
) -> None:
    statuses = []
    for _ in range(3):
        async with client.post("/things", headers={"X-Who": "alice"}) as r:
            statuses.append(r.status)
    assert statuses == [200, 200, 429]
    async with client.post("/things", headers={"X-Who": "alice"}) as r:
        assert r.content_type == PROBLEM_CONTENT_TYPE
        assert r.headers["Retry-After"] == "1000"
        body = await r.json()
    assert body["limit"] == "things_per_user"
    assert body["instance"] == "/things"
    async with client.post("/things", headers={"X-Who": "bob"}) as r:
        assert r.status == 200
