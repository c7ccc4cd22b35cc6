"""Automower end to end: Fleet's REST API -> gateway -> stand-in cloud -> Telemetry.

A simulated mower is served through the stand-in Automower Connect cloud (the vendor's
limit of one request a second per key kept), registered in a real Fleet as kind
``automower``, commanded through Fleet's REST API, and its outcome, statuses and states
read back from Telemetry's read models.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest

from mowdeck.authn import TokenVerifier
from mowdeck.authz import LocalAuthorizer, PostgresTupleStore, grant_tuples
from mowdeck.kit.bus import Bus
from mowdeck.kit.migrate import discover, migrate, sql_root
from mowdeck.telemetry.service import TelemetryService
from mowdeck.telemetry.settings import TelemetrySettings
from simulator import BatteryFault, ErrorFault, FleetConfig, SimulatorServer
from simulator.automower.bridge import AutomowerBridges
from tests.e2e.test_telemetry_e2e import _get
from tests.integration.fleet.conftest import AUTH, Api, start_fleet
from tests.integration.gateway.conftest import running_gateway, settings_for
from tests.support.eventually import eventually
from tests.support.natsserver import NatsServer

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    await migrate(database_url, discover(sql_root(), ["fleet", "authz", "telemetry"]))
    p = await asyncpg.create_pool(database_url, min_size=1, max_size=8)
    yield p
    await p.close()


@pytest.fixture
async def cloud(tmp_path: Path) -> AsyncIterator[tuple[SimulatorServer, AutomowerBridges]]:
    server = SimulatorServer(FleetConfig(mowers=1, seed=11, speed=10.0))
    await server.start()
    bridges = AutomowerBridges(server.fleet)  # the vendor's 1 request/s
    await bridges.start()
    bridges.write_credentials(tmp_path / "keys")
    yield server, bridges
    await bridges.stop()
    await server.stop()


async def test_an_automower_registered_in_fleet_is_commanded_and_read_back_from_telemetry(  # noqa: PLR0917 - fixtures
    nats_server: NatsServer,
    bus: Bus,
    database_url: str,
    pool: asyncpg.Pool,
    cloud: tuple[SimulatorServer, AutomowerBridges],
    tmp_path: Path,
) -> None:
    server, bridges = cloud
    authorizer = LocalAuthorizer(PostgresTupleStore(pool))
    fleet = await start_fleet(bus, pool, authorizer)
    telemetry = TelemetryService(
        TelemetrySettings(
            nats_url=nats_server.url,
            database_url=database_url,
            http_port=0,
            telemetry_batch_linger_ms=5.0,
            telemetry_seed_timeout_seconds=0.5,
        ),
        bus=bus,
        authorizer=authorizer,
        verifier=TokenVerifier(AUTH),
        retention=False,
    )
    await telemetry.start()
    endpoints = bridges.endpoints
    settings = settings_for(
        nats_server.url,
        [],
        gateway_credentials_dir=str(tmp_path / "keys"),
        automower_token_url=endpoints["MOWDECK_AUTOMOWER_TOKEN_URL"],
        automower_api_url=endpoints["MOWDECK_AUTOMOWER_API_URL"],
        automower_ws_url=endpoints["MOWDECK_AUTOMOWER_WS_URL"],
    )
    reg = bridges.registrations()[0]
    try:
        async with aiohttp.ClientSession() as http, running_gateway(settings) as gateway:
            api = Api(http, fleet.url, "olga", uuid.uuid4())
            await authorizer.write(grant_tuples(api.account, api.user, "admin"))
            status, body = await api.call(
                "POST",
                "/v1/mowers",
                {"name": "Front garden", "connection": {"kind": "automower",
                                                        "options": reg.connection.options}},
            )  # fmt: skip
            assert status == 201, body
            mower_id = uuid.UUID(body["mower_id"])
            await eventually(lambda: mower_id in gateway.connections, 10)
            await eventually(lambda: gateway.connections[mower_id].connected, 10)
            base = f"{telemetry.url}/v1/mowers/{mower_id}"
            http.headers["Authorization"] = api.headers["Authorization"]

            async def state(*activities: str) -> Any:
                code, found = await _get(http, base + "/state")
                return found if code == 200 and found["activity"] in activities else None

            docked = await eventually(lambda: state("docked", "charging"), 10)
            assert docked["raw"]["automower.model"] == "Automower 450X (simulated)"
            assert docked["connection"] == "automower-cloud"

            await server.inject(reg.mower_id, BatteryFault(level=100))
            status, result = await api.call(
                "POST",
                f"/v1/mowers/{mower_id}/commands?wait=10",
                {"command": {"kind": "start_mow"}},
            )
            assert (status, result["status"]) == (200, "executed"), result
            start_id = result["command_id"]
            await eventually(lambda: state("mowing"), 15)

            status, result = await api.call(
                "POST",
                f"/v1/mowers/{mower_id}/commands?wait=10",
                {"command": {"kind": "start_mow", "work_area": "Front lawn"}},
            )
            assert (status, result["status"]) == (200, "rejected"), result
            assert "has no work areas" in result["reason"]

            status, result = await api.call(
                "POST",
                f"/v1/mowers/{mower_id}/commands?wait=10",
                {"command": {"kind": "emergency_stop", "reason": "dog on the lawn"}},
            )
            assert (status, result["status"]) == (200, "executed"), result
            await eventually(lambda: state("paused"), 10)

            await server.inject(reg.mower_id, ErrorFault(code="lifted"))
            lifted = await eventually(lambda: state("error"), 10)
            assert lifted["error_code"] == "automower.71"
            # The mower-local time the error began at, back in UTC through its time zone.
            began = datetime.fromisoformat(lifted["raw"]["automower.error_code_at"])
            assert abs((datetime.now(UTC) - began).total_seconds()) < 60

            async def timeline() -> Any:
                _, found = await _get(http, base + "/commands")
                mine = [r["status"] for r in found["items"] if r["command_id"] == start_id]
                return mine if "executed" in mine else None

            assert await eventually(timeline, 10) == ["accepted", "executed"]
    finally:
        await telemetry.stop()
        await fleet.stop()
