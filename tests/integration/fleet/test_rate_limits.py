"""Command rate limits on a real Fleet: 429 past a burst, never for an emergency stop.

What was accepted is counted where it went: the command log's rows and the messages on
the COMMANDS stream, read up to an emergency stop sent after the burst (the sentinel).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import asyncpg
import msgspec
import pytest

from contracts.v1 import decode_command
from mowdeck.authz import Authorizer, grant_tuples
from mowdeck.fleet import FleetService
from mowdeck.kit.bus import Bus
from simulator import FleetConfig, SimulatorServer
from tests.integration.fleet.conftest import Api, start_fleet
from tests.integration.fleet.test_commands import registered
from tests.integration.fleet.test_rest import owner
from tests.integration.gateway.conftest import running_gateway, settings_for, wait_connected
from tests.support.natsserver import NatsServer

pytestmark = pytest.mark.timeout(60)

PAUSE = {"command": {"kind": "pause_mow"}}
STOP = {"command": {"kind": "emergency_stop", "reason": "child on the lawn"}}
# Hardly any refill within a test: a burst is all there is.
SLOW = 0.001


@contextlib.asynccontextmanager
async def running(bus: Bus, pool: asyncpg.Pool, authorizer: Authorizer, **changes: Any) -> Any:
    service = await start_fleet(bus, pool, authorizer, **changes)
    try:
        yield service
    finally:
        await service.stop()


async def published_until(bus: Bus, mower_id: str, sentinel: str) -> list[tuple[str, str]]:
    """(kind, command id) of every command of the mower on the stream, up to the sentinel."""
    sub = await bus.js.subscribe(f"command.mower.{mower_id}", ordered_consumer=True)
    found: list[tuple[str, str]] = []
    try:
        while not found or found[-1][1] != sentinel:
            envelope = decode_command((await sub.next_msg(timeout=5)).data)
            found.append((envelope.kind, str(envelope.command_id)))
    finally:
        await sub.unsubscribe()
    return found[:-1]


async def logged(pool: asyncpg.Pool, mower_id: str, kind: str) -> int:
    """Commands of ``kind`` for the mower in the command log."""
    count = await pool.fetchval(
        "SELECT count(*) FROM fleet_commands WHERE mower_id = $1 AND kind = $2",
        uuid.UUID(mower_id),
        kind,
    )
    return int(count)


def refused(service: FleetService, limit: str) -> float:
    value = service.metrics_registry.get_sample_value(
        "mowdeck_fleet_rate_limited_total", {"limit": limit}
    )
    return value or 0.0


async def test_past_the_user_s_burst_a_command_is_429_with_retry_after_and_a_stop_still_runs(
    bus: Bus, pool: asyncpg.Pool, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    async with running(
        bus,
        pool,
        authorizer,
        fleet_commands_per_user_rate=SLOW,
        fleet_commands_per_user_burst=5,
    ) as fleet:
        api = await owner(http, fleet, authorizer)
        mower_id = await registered(api)
        path = f"/v1/mowers/{mower_id}/commands"
        answers = [await api.call("POST", path, PAUSE) for _ in range(8)]
        assert [status for status, _ in answers] == [202] * 5 + [429] * 3
        async with http.post(fleet.url + path, json=PAUSE, headers=api.headers) as r:
            assert r.status == 429
            assert r.content_type == "application/problem+json"
            retry_after = int(r.headers["Retry-After"])
            problem = await r.json()
        assert retry_after >= 1
        assert problem["type"] == "https://mowdeck.dev/problems/rate-limited"
        assert problem["limit"] == "commands_per_user"
        assert problem["retry_after"] == retry_after
        status, stop = await api.call("POST", path, STOP)
        assert status == 202
        accepted = {body["command_id"] for status, body in answers if status == 202}
        on_stream = await published_until(bus, mower_id, stop["command_id"])
        assert {command_id for _, command_id in on_stream} == accepted
        assert await logged(pool, mower_id, "pause_mow") == 5
        assert refused(fleet, "commands_per_user") == 4


async def test_the_account_s_limit_holds_across_two_replicas_sharing_the_table(
    bus: Bus, pool: asyncpg.Pool, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    limits = {"fleet_commands_per_account_rate": SLOW, "fleet_commands_per_account_burst": 6}
    async with (
        running(bus, pool, authorizer, **limits) as one,
        running(bus, pool, authorizer, **limits) as two,
    ):
        api = await owner(http, one, authorizer)
        mower_id = await registered(api)
        colleague = Api(http, two.url, "colleague", api.account)
        await authorizer.write(grant_tuples(api.account, colleague.user, "operator"))
        path = f"/v1/mowers/{mower_id}/commands"
        answers = []
        for _ in range(6):  # each user, each on a replica of their own, in turn
            for caller in (api, colleague):
                answers.append(await caller.call("POST", path, PAUSE))
        statuses = [status for status, _ in answers]
        assert statuses.count(202) == 6
        assert statuses.count(429) == 6
        assert {body["limit"] for status, body in answers if status == 429} == {
            "commands_per_account"
        }
        status, stop = await colleague.call("POST", path, STOP)
        assert status == 202
        on_stream = await published_until(bus, mower_id, stop["command_id"])
        assert len(on_stream) == 6
        assert await logged(pool, mower_id, "pause_mow") == 6
        assert refused(one, "commands_per_account") + refused(two, "commands_per_account") == 6


async def test_with_the_table_locked_a_stop_does_not_wait_and_commands_fall_back_to_local_limits(
    bus: Bus, pool: asyncpg.Pool, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    async with running(
        bus,
        pool,
        authorizer,
        fleet_commands_per_account_rate=SLOW,
        fleet_commands_per_account_burst=12,
        fleet_rate_limit_store_timeout_seconds=3.0,
    ) as fleet:
        api = await owner(http, fleet, authorizer)
        mower_id = await registered(api)
        path = f"/v1/mowers/{mower_id}/commands"
        async with pool.acquire() as blocker:
            lock = blocker.transaction()
            await lock.start()
            await blocker.execute("LOCK TABLE fleet_rate_limits IN ACCESS EXCLUSIVE MODE")
            try:
                waiting = [asyncio.create_task(api.call("POST", path, PAUSE)) for _ in range(10)]
                await asyncio.sleep(0.3)  # every one of them is in, waiting for the store
                started = time.perf_counter()
                stops = [await api.call("POST", path, STOP) for _ in range(3)]
                took = time.perf_counter() - started
                assert [status for status, _ in stops] == [202] * 3
                assert not any(task.done() for task in waiting)
                # Past the store's timeout the ordinary ones are limited by this replica.
                answers = await asyncio.gather(*waiting)
            finally:
                await lock.rollback()
        assert took < 3.0  # the stops did not wait out the store's timeout
        assert [status for status, _ in answers] == [202] * 10
        assert (
            fleet.metrics_registry.get_sample_value("mowdeck_fleet_rate_limit_fallbacks_total")
            == 10
        )
        on_stream = await published_until(bus, mower_id, stops[-1][1]["command_id"])
        assert [kind for kind, _ in on_stream].count("emergency_stop") == 2


async def test_with_the_table_gone_commands_are_limited_by_this_replica_alone(
    bus: Bus, pool: asyncpg.Pool, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    async with running(
        bus,
        pool,
        authorizer,
        fleet_commands_per_account_rate=SLOW,
        fleet_commands_per_account_burst=4,
    ) as fleet:
        api = await owner(http, fleet, authorizer)
        mower_id = await registered(api)
        path = f"/v1/mowers/{mower_id}/commands"
        await pool.execute("ALTER TABLE fleet_rate_limits RENAME TO fleet_rate_limits_away")
        try:
            answers = [await api.call("POST", path, PAUSE) for _ in range(6)]
            status, _ = await api.call("POST", path, STOP)
        finally:
            await pool.execute("ALTER TABLE fleet_rate_limits_away RENAME TO fleet_rate_limits")
        assert [status for status, _ in answers] == [202] * 4 + [429] * 2
        assert status == 202
        assert await logged(pool, mower_id, "pause_mow") == 4
        assert (
            fleet.metrics_registry.get_sample_value("mowdeck_fleet_rate_limit_fallbacks_total") == 6
        )


StartSimulator = Callable[[uuid.UUID], Awaitable[SimulatorServer]]


@pytest.fixture
async def simulator() -> AsyncIterator[StartSimulator]:
    """Starts a simulator with one mower of the given account (stopped after the test)."""
    servers: list[SimulatorServer] = []

    async def start(account: uuid.UUID) -> SimulatorServer:
        server = SimulatorServer(FleetConfig(mowers=1, seed=5, speed=20.0, account_id=account))
        await server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.stop()


async def test_an_emergency_stop_in_a_refused_burst_is_accepted_and_executed(  # noqa: PLR0917 - a fixture per part: Fleet's, the gateway's, the simulator's
    nats_server: NatsServer,
    bus: Bus,
    pool: asyncpg.Pool,
    authorizer: Authorizer,
    http: aiohttp.ClientSession,
    simulator: StartSimulator,
) -> None:
    async with running(
        bus,
        pool,
        authorizer,
        fleet_commands_per_user_rate=SLOW,
        fleet_commands_per_user_burst=5,
    ) as fleet:
        api = await owner(http, fleet, authorizer)
        sim = await simulator(api.account)
        (mower,) = sim.registrations()
        status, _ = await api.call(
            "POST",
            "/v1/mowers",
            {
                "mower_id": str(mower.mower_id),
                "name": mower.name,
                "connection": msgspec.to_builtins(mower.connection),
            },
        )
        assert status == 201
        async with running_gateway(settings_for(nats_server.url, [])) as gateway:
            await wait_connected(gateway, 1)
            path = f"/v1/mowers/{mower.mower_id}/commands"
            burst = [asyncio.create_task(api.call("POST", path, PAUSE)) for _ in range(6)]
            stop = asyncio.create_task(api.call("POST", path + "?wait=10", STOP))
            burst += [asyncio.create_task(api.call("POST", path, PAUSE)) for _ in range(6)]
            statuses = [status for status, _ in await asyncio.gather(*burst)]
            status, result = await stop
            assert statuses.count(202) == 5
            assert statuses.count(429) == 7
            assert (status, result["status"]) == (200, "executed")
            assert sim.fleet.mowers[0].body.activity == "stopped"
        assert refused(fleet, "commands_per_user") == 7
