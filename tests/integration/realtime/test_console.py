"""The operator console served by the Realtime service at ``/``, signed out and signed in."""

from __future__ import annotations

import aiohttp

from mowdeck.authn import TokenIssuer
from mowdeck.realtime.console import OneTimeCodes
from tests.integration.realtime.conftest import ACCOUNT, ServiceFactory

CONSOLE_ENV = {
    "realtime_console_fleet_url": "http://fleet.example:8080",
    "realtime_console_telemetry_url": "http://telemetry.example:8082/",
    "realtime_console_notifications_url": "http://notifications.example:8083",
}


async def test_a_signed_out_browser_loads_the_page_its_assets_and_configuration(
    make_service: ServiceFactory, http: aiohttp.ClientSession
) -> None:
    service = await make_service(**CONSOLE_ENV)
    async with http.get(f"{service.url}/") as page:
        assert page.status == 200
        assert page.content_type == "text/html"
        assert '<script src="/console/app.js">' in await page.text()
    for asset, kind in (("app.js", "text/javascript"), ("style.css", "text/css")):
        async with http.get(f"{service.url}/console/{asset}") as answer:
            assert (answer.status, answer.content_type) == (200, kind)
    async with http.get(f"{service.url}/console/config.json") as answer:
        assert await answer.json() == {
            "fleet_url": "http://fleet.example:8080",
            "telemetry_url": "http://telemetry.example:8082",
            "notifications_url": "http://notifications.example:8083",
            "realtime_url": "",  # the stream is the page's own origin
        }
    # Any other path is unknown, not a question of a token.
    async with http.get(f"{service.url}/console/secrets.txt") as answer:
        assert answer.status == 404
    async with http.post(f"{service.url}/v1/stream/tickets") as answer:
        assert answer.status == 401


async def test_the_page_runs_only_its_own_code_talks_only_to_its_apis_and_is_never_framed(
    make_service: ServiceFactory, http: aiohttp.ClientSession
) -> None:
    service = await make_service(**CONSOLE_ENV)
    for path in ("/", "/console/app.js", "/console/style.css", "/console/config.json"):
        async with http.get(f"{service.url}{path}") as answer:
            headers = answer.headers
            assert headers["X-Frame-Options"] == "DENY", path
            assert headers["Referrer-Policy"] == "no-referrer", path
            assert headers["X-Content-Type-Options"] == "nosniff", path
            assert headers["Server"] == "Mowdeck", path
            directives = headers["Content-Security-Policy"].split("; ")
            policy = dict(d.split(" ", 1) for d in directives)
    assert policy["default-src"] == "'none'"
    assert policy["script-src"] == "'self'"  # no inline script, no eval
    assert policy["style-src"] == "'self'"
    assert policy["frame-ancestors"] == "'none'"
    assert policy["connect-src"].split() == [
        "'self'",
        "http://fleet.example:8080",
        "http://notifications.example:8083",
        "http://telemetry.example:8082",
    ]
    async with http.get(f"{service.url}/") as page:
        html = await page.text()
    # What the policy allows is all the page needs: no inline script or style.
    assert "<script>" not in html and " style=" not in html and "<style" not in html


async def test_without_an_exchange_there_are_no_sign_in_codes(
    make_service: ServiceFactory, http: aiohttp.ClientSession
) -> None:
    service = await make_service()
    async with http.post(f"{service.url}/console/exchange", json={"code": "x"}) as answer:
        assert answer.status == 404


async def test_a_code_from_a_sign_in_link_opens_a_stream_once(
    make_service: ServiceFactory, http: aiohttp.ClientSession, issuer: TokenIssuer
) -> None:
    codes = OneTimeCodes(ttl_s=60)
    service = await make_service(console_codes=codes)
    code = codes.issue(issuer.mint("alice", ACCOUNT))
    async with http.post(f"{service.url}/console/exchange", json={"code": code}) as answer:
        assert answer.status == 200
        token = (await answer.json())["token"]
    async with http.post(f"{service.url}/console/exchange", json={"code": code}) as answer:
        assert answer.status == 400
        assert (await answer.json())["type"].endswith("invalid-code")
    # What the page does next: a ticket with the token, then the stream with the ticket.
    headers = {"Authorization": f"Bearer {token}"}
    async with http.post(f"{service.url}/v1/stream/tickets", headers=headers) as answer:
        assert answer.status == 201
        ticket = (await answer.json())["ticket"]
    async with http.get(f"{service.url}/v1/stream?ticket={ticket}") as stream:
        assert stream.status == 200
        assert stream.content_type == "text/event-stream"
