"""``fleet.mowers.list``: shards, everything, malformed requests, replicas in a queue group."""

from __future__ import annotations

import uuid

import aiohttp
import asyncpg
import msgspec
import pytest

from contracts.v1 import ContractError, MowerListReply, MowerListRequest, decode, shard_of
from contracts.v1.subjects import FLEET_MOWERS_LIST
from mowdeck.authz import Authorizer
from mowdeck.fleet import FleetService
from mowdeck.kit.bus import Bus
from tests.integration.fleet.conftest import start_fleet
from tests.integration.fleet.test_commands import registered
from tests.integration.fleet.test_rest import owner


async def ask(bus: Bus, index: int, count: int) -> set[str]:
    """The mower ids Fleet lists for a shard."""
    reply = await bus.request(
        FLEET_MOWERS_LIST, MowerListRequest(shard_index=index, shard_count=count), timeout=2
    )
    return {str(m.mower_id) for m in decode(reply, MowerListReply).mowers}


async def test_shards_partition_the_registry_and_one_shard_is_everything(
    fleet: FleetService,
    bus: Bus,
    pool: asyncpg.Pool,
    authorizer: Authorizer,
    http: aiohttp.ClientSession,
) -> None:
    await pool.execute("DELETE FROM fleet_mowers")
    api = await owner(http, fleet, authorizer)
    ids = {await registered(api) for _ in range(6)}
    replica = await start_fleet(bus, pool, authorizer)  # a second member of the queue group
    try:
        assert await ask(bus, 0, 1) == ids
        halves = [await ask(bus, i, 3) for i in range(3)]
        assert set().union(*halves) == ids
        for i, half in enumerate(halves):
            assert all(shard_of(uuid.UUID(m), 3) == i for m in half)
    finally:
        await replica.stop()


@pytest.mark.parametrize(
    "payload",
    [b"{not json", b'{"shard_index": 2, "shard_count": 2}', b'{"shard_count": 0}'],
    ids=["malformed", "index-out-of-range", "zero-shards"],
)
async def test_a_malformed_request_gets_an_error_reply_not_silence(
    fleet: FleetService, bus: Bus, payload: bytes
) -> None:
    reply = await bus.nc.request(FLEET_MOWERS_LIST, payload, timeout=2)
    assert reply.headers["Nats-Service-Error-Code"] == "400"
    assert msgspec.json.decode(reply.data)["error"]["code"] == 400
    with pytest.raises(ContractError):
        decode(reply.data, MowerListReply)  # never mistaken for an empty registry
