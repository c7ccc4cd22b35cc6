"""Fleet's API from a browser: only the configured origins may read it."""

from __future__ import annotations

import aiohttp
import asyncpg

from mowdeck.authz import Authorizer
from mowdeck.kit.bus import Bus
from tests.integration.fleet.conftest import start_fleet
from tests.support.cors import ALLOWED, check_preflights


async def test_a_preflight_from_the_configured_origin_only(
    bus: Bus, pool: asyncpg.Pool, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    fleet = await start_fleet(bus, pool, authorizer, http_cors_origins=[ALLOWED])
    try:
        await check_preflights(http, f"{fleet.url}/v1/mowers", "POST")
    finally:
        await fleet.stop()
