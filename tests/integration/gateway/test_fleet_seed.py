"""The gateway seeded by a real Fleet: a registration no adapter takes does not stop the rest."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import aiohttp
import asyncpg
import pytest

from mowdeck.authz import LocalAuthorizer, PostgresTupleStore, grant_tuples
from mowdeck.fleet import FleetService
from mowdeck.kit.bus import Bus
from mowdeck.kit.migrate import discover, migrate, sql_root
from tests.integration.fleet.conftest import Api, start_fleet
from tests.integration.gateway.conftest import eventually, running_gateway, settings_for
from tests.support.natsserver import NatsServer

pytestmark = pytest.mark.timeout(60)

BAD = {"kind": "simulator", "options": {}}  # Fleet takes it; the simulator adapter does not


def reachable() -> dict[str, object]:
    """A connection the gateway takes, to a device of its own (one registration each)."""
    return {"kind": "simulator", "options": {"url": f"ws://127.0.0.1:9/never/{uuid.uuid4()}"}}


@pytest.fixture
async def fleet_pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    """A pool on a migrated database with no mowers."""
    await migrate(database_url, discover(sql_root(), ["fleet", "authz"]))
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=8)
    await pool.execute("DELETE FROM fleet_mowers")
    yield pool
    await pool.close()


@pytest.fixture
async def fleet(bus: Bus, fleet_pool: asyncpg.Pool) -> AsyncIterator[FleetService]:
    """A running Fleet on the test's bus."""
    service = await start_fleet(bus, fleet_pool, LocalAuthorizer(PostgresTupleStore(fleet_pool)))
    yield service
    await service.stop()


async def register(api: Api, connection: dict[str, object]) -> uuid.UUID:
    status, body = await api.call("POST", "/v1/mowers", {"name": "M", "connection": connection})
    assert status == 201, body
    return uuid.UUID(body["mower_id"])


async def test_a_registration_the_adapter_refuses_is_skipped_and_every_other_mower_loads(
    nats_server: NatsServer, fleet: FleetService, fleet_pool: asyncpg.Pool
) -> None:
    authorizer = LocalAuthorizer(PostgresTupleStore(fleet_pool))
    async with aiohttp.ClientSession() as http:
        accounts = [Api(http, fleet.url, f"owner-{n}", uuid.uuid4()) for n in range(2)]
        for api in accounts:
            await authorizer.write(grant_tuples(api.account, api.user, "admin"))
        bad = await register(accounts[0], BAD)
        good: dict[uuid.UUID, set[uuid.UUID]] = {api.account: set() for api in accounts}
        # Fleet lists by id: more mowers until each account has some behind the bad one.
        while not all(any(m > bad for m in mowers) for mowers in good.values()):
            for api in accounts:
                good[api.account].add(await register(api, reachable()))
    loaded = set().union(*good.values())
    settings = settings_for(nats_server.url, [])
    async with running_gateway(settings) as gw:
        await eventually(gw.parts.seed.seeded.is_set)
        assert set(gw.mowers) == loaded
        assert bad not in gw.mowers
        refused = gw.metrics_registry.get_sample_value(
            "mowdeck_gateway_registrations_refused_total", {"reason": "invalid"}
        )
        assert refused == 1
        async with aiohttp.ClientSession(gw.url) as client, client.get("/healthz") as r:
            assert r.status == 200


async def test_a_device_url_the_gateway_does_not_allow_is_refused_at_apply_and_the_rest_loads(
    nats_server: NatsServer, bus: Bus, fleet_pool: asyncpg.Pool
) -> None:
    # Fleet under a wider list than the gateway's (or a row stored before the rule).
    authorizer = LocalAuthorizer(PostgresTupleStore(fleet_pool))
    wide = await start_fleet(
        bus, fleet_pool, authorizer, gateway_device_hosts=["127.0.0.1", "10.0.0.0/8"]
    )
    try:
        async with aiohttp.ClientSession() as http:
            api = Api(http, wide.url, "owner", uuid.uuid4())
            await authorizer.write(grant_tuples(api.account, api.user, "admin"))
            inside = await register(
                api, {"kind": "simulator", "options": {"url": "ws://10.0.0.1:5432/"}}
            )
            good = {await register(api, reachable()) for _ in range(3)}
        async with running_gateway(settings_for(nats_server.url, [])) as gw:  # ["127.0.0.1"]
            await eventually(gw.parts.seed.seeded.is_set)
            assert set(gw.mowers) == good
            assert inside not in gw.mowers and inside not in gw.connections
            refused = gw.metrics_registry.get_sample_value(
                "mowdeck_gateway_registrations_refused_total", {"reason": "endpoint_not_allowed"}
            )
            assert refused == 1
    finally:
        await wide.stop()
