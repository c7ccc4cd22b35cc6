"""What every service's CORS test checks: preflights from the allowed origin and another."""

from __future__ import annotations

import aiohttp

ALLOWED = "http://console.example:8084"
OTHER = "http://elsewhere.example"


async def check_preflights(
    http: aiohttp.ClientSession, url: str, method: str, *, headers: dict[str, str] | None = None
) -> None:
    """A preflight for ``method url`` from ``ALLOWED`` gets the CORS headers (no token
    needed); one from ``OTHER`` is refused without them; an answer to ``ALLOWED`` (here
    with ``headers``, or refused without them) is readable, one to ``OTHER`` is not."""
    asked = {
        "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": "authorization",
    }
    async with http.options(url, headers={"Origin": ALLOWED, **asked}) as answer:
        assert answer.status == 204
        assert answer.headers["Access-Control-Allow-Origin"] == ALLOWED
        assert method in answer.headers["Access-Control-Allow-Methods"]
        assert "Authorization" in answer.headers["Access-Control-Allow-Headers"]
    async with http.options(url, headers={"Origin": OTHER, **asked}) as answer:
        assert answer.status == 403
        assert "Access-Control-Allow-Origin" not in answer.headers
        assert "Access-Control-Allow-Methods" not in answer.headers
    for origin, readable in ((ALLOWED, True), (OTHER, False)):
        async with http.request(
            method, url, headers={"Origin": origin, **(headers or {})}
        ) as answer:
            assert answer.status < 500, await answer.text()
            assert ("Access-Control-Allow-Origin" in answer.headers) == readable
