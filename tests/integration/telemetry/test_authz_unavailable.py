"""An authorization outage: Telemetry answers the kit's one problem, as Fleet does."""

from __future__ import annotations

from typing import Any, cast

import aiohttp
from prometheus_client import CollectorRegistry

from mowdeck.authn import TokenIssuer, TokenVerifier
from mowdeck.authz import Authorizer, AuthzUnavailableError
from mowdeck.fleet.routes import problem_of
from mowdeck.kit.http import Readiness, authz_unavailable
from mowdeck.kit.http_server import HttpServer
from mowdeck.telemetry.memory import InMemoryTelemetryStore
from mowdeck.telemetry.metrics import TelemetryMetrics
from mowdeck.telemetry.routes import QueryDeps, create_app
from mowdeck.telemetry.settings import TelemetrySettings
from tests.integration.telemetry.conftest import AUTH
from tests.unit.telemetry.samples import ACCOUNT, MOWER


class Unavailable:
    """An authorizer whose backend is down."""

    async def check(self, *_: Any) -> bool:
        raise AuthzUnavailableError("tuple store: connection refused")

    async def list_objects(self, *_: Any) -> list[str]:
        raise AuthzUnavailableError("tuple store: connection refused")


async def test_an_authorization_outage_is_the_kits_503_in_telemetry_and_fleet() -> None:
    registry = CollectorRegistry()
    deps = QueryDeps(
        InMemoryTelemetryStore(),
        cast("Authorizer", Unavailable()),
        TelemetrySettings(),
        TelemetryMetrics(registry),
    )
    readiness = Readiness()
    server = HttpServer(create_app(deps, TokenVerifier(AUTH), readiness, registry), "127.0.0.1", 0)
    await server.start()
    token = TokenIssuer(AUTH).mint("alice", ACCOUNT)
    answers = []
    try:
        async with aiohttp.ClientSession(
            server.url, headers={"Authorization": f"Bearer {token}"}
        ) as http:
            for path in (f"/v1/mowers/{MOWER}/state", "/v1/states"):
                async with http.get(path) as r:
                    assert (r.status, r.content_type) == (503, "application/problem+json")
                    assert r.headers["Retry-After"] == "1"
                    answers.append((path, await r.json(content_type=None)))
    finally:
        await server.stop()
    fleet = problem_of(AuthzUnavailableError("tuple store: connection refused"))
    for path, body in answers:
        assert body == authz_unavailable().body(path) == fleet.body(path)
    labels = {"route": "/v1/mowers/{mower_id}/state", "method": "GET", "status": "503"}
    assert registry.get_sample_value("mowdeck_telemetry_http_requests_total", labels) == 1
