"""``fleet.mowers.list``: shards, everything, malformed requests, replicas in a queue group."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import aiohttp
import asyncpg
import msgspec
import pytest

from contracts.v1 import (
    Connection,
    ContractError,
    MowerListReply,
    MowerListRequest,
    MowerRegistration,
    decode,
    encode,
    shard_of,
)
from contracts.v1.subjects import FLEET_MOWERS_LIST
from mowdeck.authz import Authorizer
from mowdeck.fleet import FleetService
from mowdeck.fleet.ports import MowerRecord
from mowdeck.fleet.postgres import PostgresMowerRepository
from mowdeck.fleet.rules import MAX_OPTIONS_BYTES, registry_event
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
    [
        b"{not json",
        b'{"shard_index": 2, "shard_count": 2}',
        b'{"shard_count": 0}',
        b'{"x": ' + b"[" * 20_000 + b"]" * 20_000 + b"}",  # past the limit on every Python
    ],
    ids=["malformed", "index-out-of-range", "zero-shards", "deeply-nested"],
)
async def test_a_malformed_request_gets_an_error_reply_not_silence(
    fleet: FleetService, bus: Bus, payload: bytes
) -> None:
    reply = await bus.nc.request(FLEET_MOWERS_LIST, payload, timeout=2)
    assert reply.headers["Nats-Service-Error-Code"] == "400"
    assert msgspec.json.decode(reply.data)["error"]["code"] == 400
    with pytest.raises(ContractError):
        decode(reply.data, MowerListReply)  # never mistaken for an empty registry


async def test_a_registry_larger_than_one_payload_is_paged_by_size(
    fleet: FleetService, bus: Bus, pool: asyncpg.Pool
) -> None:
    await pool.execute("DELETE FROM fleet_mowers")
    repo, now = PostgresMowerRepository(pool), datetime.now(UTC)
    ids = set()
    # 80 registrations at the options limit: about 1.3 MB, more than one reply can carry.
    for i in range(80):
        reg = MowerRegistration(
            mower_id=uuid.uuid4(),
            account_id=uuid.uuid4(),
            name=f"m{i}",
            connection=Connection(
                kind="simulator", options={"blob": "x" * (MAX_OPTIONS_BYTES - 20)}
            ),
        )
        await repo.add(MowerRecord(reg, now, now), registry_event("mower.registered", reg, now=now))
        ids.add(reg.mower_id)
    request: MowerListRequest | None = MowerListRequest()
    pages: list[MowerListReply] = []
    while request is not None:
        data = await bus.request(FLEET_MOWERS_LIST, request, timeout=5)
        assert len(data) <= bus.nc.max_payload
        pages.append(decode(data, MowerListReply))
        request = request.next_page(pages[-1])
    assert len(pages) >= 2
    listed = [m.mower_id for page in pages for m in page.mowers]
    assert listed == sorted(ids)  # each once, in order


async def test_a_single_registration_too_large_for_any_reply_does_not_block_the_list(
    fleet: FleetService, bus: Bus, pool: asyncpg.Pool
) -> None:
    await pool.execute("DELETE FROM fleet_mowers")
    repo, now = PostgresMowerRepository(pool), datetime.now(UTC)
    regs = [
        MowerRegistration(
            mower_id=uuid.UUID(int=i),
            account_id=uuid.uuid4(),
            name="M",
            connection=Connection(kind="simulator", options={"blob": "x" * size}),
        )
        for i, size in ((1, 10), (2, bus.nc.max_payload), (3, 10))
    ]
    for reg in regs:  # the middle one was stored before options were bounded
        await repo.add(MowerRecord(reg, now, now), registry_event("mower.registered", reg, now=now))
    reply = decode(
        await bus.request(FLEET_MOWERS_LIST, MowerListRequest(), timeout=5), MowerListReply
    )
    assert [m.mower_id.int for m in reply.mowers] == [1, 3]
    assert len(encode(reply)) < bus.nc.max_payload
