"""Telemetry's API from a browser: only the configured origins may read it."""

from __future__ import annotations

import aiohttp

from mowdeck.authn import TokenIssuer
from tests.integration.telemetry.conftest import ServiceFactory
from tests.support.cors import ALLOWED, check_preflights
from tests.unit.telemetry.samples import ACCOUNT


async def test_a_preflight_from_the_configured_origin_only(
    make_service: ServiceFactory, issuer: TokenIssuer
) -> None:
    service = await make_service(http_cors_origins=[ALLOWED])
    token = issuer.mint("alice", ACCOUNT)
    async with aiohttp.ClientSession() as http:
        await check_preflights(
            http,
            f"{service.url}/v1/states",
            "GET",
            headers={"Authorization": f"Bearer {token}"},
        )
