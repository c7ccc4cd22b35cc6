"""The console's routes: the page and its assets, its configuration, one-time codes."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from mowdeck.kit.http import problem_middleware
from mowdeck.realtime.console import (
    CONSOLE_PUBLIC_PATHS,
    ConsoleConfig,
    OneTimeCodes,
    console_config,
    console_routes,
)
from mowdeck.realtime.settings import load_realtime_settings

CONFIG = ConsoleConfig(fleet_url="http://f", telemetry_url="http://t", notifications_url="http://n")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def codes(clock: Clock) -> OneTimeCodes:
    return OneTimeCodes(ttl_s=60, clock=clock)


@pytest.fixture
async def client(codes: OneTimeCodes) -> AsyncIterator[TestClient[web.Request, web.Application]]:
    app = web.Application(middlewares=[problem_middleware])
    app.add_routes(console_routes(CONFIG, codes))
    async with TestClient(TestServer(app)) as c:
        yield c


def test_a_code_is_good_once(codes: OneTimeCodes) -> None:
    code = codes.issue("tok")
    assert codes.redeem(code) == "tok"
    assert codes.redeem(code) is None
    assert codes.redeem("made-up") is None


def test_a_code_expires(codes: OneTimeCodes, clock: Clock) -> None:
    code = codes.issue("tok")
    clock.now = 60
    assert codes.redeem(code) is None


async def test_the_page_its_assets_and_its_configuration(
    client: TestClient[web.Request, web.Application],
) -> None:
    page = await client.get("/")
    assert page.content_type == "text/html"
    assert "/console/app.js" in await page.text()
    script = await client.get("/console/app.js")
    assert script.content_type == "text/javascript"
    assert (await client.get("/console/style.css")).content_type == "text/css"
    assert (await client.get("/console/secrets.txt")).status == 404
    config = await (await client.get("/console/config.json")).json()
    assert config == {
        "fleet_url": "http://f",
        "telemetry_url": "http://t",
        "notifications_url": "http://n",
        "realtime_url": "",
    }


async def test_the_exchange_turns_a_code_into_its_token_once(
    client: TestClient[web.Request, web.Application], codes: OneTimeCodes
) -> None:
    code = codes.issue("tok")
    first = await client.post("/console/exchange", json={"code": code})
    again = await client.post("/console/exchange", json={"code": code})
    assert (first.status, await first.json()) == (200, {"token": "tok"})
    assert again.status == 400
    assert "used or expired" in (await again.json())["detail"]


def test_every_route_a_signed_out_browser_loads_is_public() -> None:
    paths = {route.path for route in console_routes(CONFIG, OneTimeCodes())}
    assert {"/", "/console/config.json", "/console/exchange"} <= set(CONSOLE_PUBLIC_PATHS)
    assert paths <= set(CONSOLE_PUBLIC_PATHS)


def test_the_configuration_comes_from_the_settings() -> None:
    settings = load_realtime_settings(
        {
            "MOWDECK_REALTIME_CONSOLE_FLEET_URL": "http://fleet.example/",
            "MOWDECK_REALTIME_CONSOLE_TELEMETRY_URL": "http://telemetry.example",
            "MOWDECK_REALTIME_CONSOLE_NOTIFICATIONS_URL": "http://notifications.example",
        }
    )
    # The stream is the page's own origin: Realtime serves the page.
    assert console_config(settings) == ConsoleConfig(
        fleet_url="http://fleet.example",
        telemetry_url="http://telemetry.example",
        notifications_url="http://notifications.example",
        realtime_url="",
    )
    # Unset: Fleet and Telemetry at the page's origin, no inbox.
    assert console_config(load_realtime_settings({})) == ConsoleConfig(
        fleet_url="", telemetry_url="", notifications_url="", realtime_url=""
    )
