"""Telemetry end to end: simulator -> gateway -> NATS -> Telemetry -> PostgreSQL -> HTTP.

A mower of an in-process simulator is commanded to mow through the bus; what the gateway
publishes is stored by Telemetry and read back through its HTTP API with a real token.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest

from contracts.v1 import (
    CommandEnvelope,
    MowerListReply,
    MowerRegistration,
    StartMow,
    encode,
)
from contracts.v1.subjects import FLEET_MOWERS_LIST
from mowdeck.authn import AuthSettings, TokenIssuer, TokenVerifier
from mowdeck.authz import (
    InMemoryTupleStore,
    LocalAuthorizer,
    Tuple,
    account_object,
    grant_tuples,
    mower_object,
)
from mowdeck.kit.bus import Bus
from mowdeck.kit.migrate import discover, migrate, sql_root
from mowdeck.telemetry.service import TelemetryService
from mowdeck.telemetry.settings import TelemetrySettings
from simulator import BatteryFault, FleetConfig, SimulatorServer
from tests.integration.gateway.conftest import running_gateway, settings_for
from tests.support.eventually import eventually
from tests.support.natsserver import NatsServer

ACCOUNT = uuid.UUID("00000000-0000-4000-8000-0000000e2e01")
AUTH = AuthSettings(jwt_secret="telemetry-e2e-secret-0123456789abcdef")

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def sim() -> AsyncIterator[SimulatorServer]:
    """Three mowers at 60x: a mowing mower loses a battery percent about every 0.6 s."""
    server = SimulatorServer(FleetConfig(mowers=3, seed=5, speed=60.0, account_id=ACCOUNT))
    await server.start()
    yield server
    await server.stop()


async def _answer_fleet(bus: Bus, mowers: list[MowerRegistration]) -> Any:
    """Stand in for Fleet: answer ``fleet.mowers.list`` (the gateway and Telemetry ask it)."""

    async def answer(msg: Any) -> None:
        await msg.respond(encode(MowerListReply(mowers=mowers)))

    return await bus.nc.subscribe(FLEET_MOWERS_LIST, cb=answer)


async def _get(http: aiohttp.ClientSession, url: str) -> tuple[int, Any]:
    async with http.get(url) as response:
        return response.status, await response.json(content_type=None)


def _iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


async def test_a_mowing_mower_is_visible_through_telemetry(
    nats_server: NatsServer, bus: Bus, database_url: str, sim: SimulatorServer
) -> None:
    await migrate(database_url, discover(sql_root(), ["authz", "telemetry"]))
    mowers = sim.registrations()
    mower = mowers[0]
    fleet = await _answer_fleet(bus, mowers)
    authorizer = LocalAuthorizer(InMemoryTupleStore())
    await authorizer.write(
        [
            *grant_tuples(ACCOUNT, "erin", "viewer"),
            *(Tuple(account_object(ACCOUNT), "account", mower_object(m.mower_id)) for m in mowers),
        ]
    )
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
    token = TokenIssuer(AUTH).mint("erin", ACCOUNT)
    began = datetime.now(UTC)
    try:
        seeded = telemetry.parts.seed.task
        assert seeded is not None
        assert await seeded == len(mowers)
        async with (
            running_gateway(
                settings_for(nats_server.url, mowers, state_heartbeat_seconds=1)
            ) as gateway,
            aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http,
        ):
            await eventually(lambda: all(c.connected for c in gateway.connections.values()))
            base = f"{telemetry.url}/v1/mowers/{mower.mower_id}"

            # The docked mower's states arrive before any command.
            async def reported() -> bool:
                status, _ = await _get(http, base + "/state")
                return status == 200

            await eventually(reported)

            # A full battery, so the mower leaves the dock at once instead of charging first.
            await sim.inject(mower.mower_id, BatteryFault(level=100))
            start = CommandEnvelope.issue(
                mower_id=mower.mower_id,
                account_id=ACCOUNT,
                command=StartMow(),
                issued_by="user:erin",
                now=datetime.now(UTC),
            )
            await bus.publish_command(start, now=datetime.now(UTC))

            async def mowing() -> Any:
                status, body = await _get(http, base + "/state")
                return body if status == 200 and body["activity"] == "mowing" else None

            state = await eventually(mowing, timeout=10)
            assert state["mower_id"] == str(mower.mower_id)
            assert state["account_id"] == str(ACCOUNT)
            assert state["stale"] is False

            window = (
                f"from={_iso(began - timedelta(minutes=1))}&to={_iso(began + timedelta(hours=1))}"
            )

            # Let it mow until the history shows the battery falling.
            async def history() -> Any:
                _, body = await _get(http, f"{base}/history?{window}")
                batteries = {row["battery"] for row in body["items"] if row["activity"] == "mowing"}
                return body["items"] if len(batteries) >= 3 else None

            rows = await eventually(history, timeout=10)
            assert len({row["activity"] for row in rows}) >= 2  # docked/leaving, then mowing
            assert [row["observed_at"] for row in rows] == sorted(
                row["observed_at"] for row in rows
            )
            mowing_batteries = [row["battery"] for row in rows if row["activity"] == "mowing"]
            assert mowing_batteries[-1] < mowing_batteries[0]

            status, binned = await _get(http, f"{base}/history?{window}&step=1m")
            assert status == 200
            assert sum(item["samples"] for item in binned["items"]) >= len(rows)

            status, track = await _get(http, f"{base}/track?{window}")
            assert status == 200
            points = {(p["lat"], p["lon"]) for p in track["items"]}
            assert len(points) >= 5, track

            async def timeline() -> Any:
                _, body = await _get(http, f"{base}/commands?{window}")
                mine = [r for r in body["items"] if r["command_id"] == str(start.command_id)]
                statuses = [r["status"] for r in mine]
                return mine if "executed" in statuses else None

            entries = await eventually(timeline, timeout=10)
            assert [r["status"] for r in entries] == ["accepted", "executed"]
            assert all(r["account_id"] == str(ACCOUNT) for r in entries)
            assert all(r["mower_id"] == str(mower.mower_id) for r in entries)

            # The other mowers stayed home, and every mower of the account is listed.
            status, listed = await _get(http, f"{telemetry.url}/v1/states")
            assert status == 200
            by_id = {item["mower_id"]: item for item in listed["items"]}
            assert set(by_id) == {str(m.mower_id) for m in mowers}
            assert all(by_id[str(m.mower_id)]["activity"] != "mowing" for m in mowers[1:])

            # A token of another account sees nothing of this mower.
            stranger = TokenIssuer(AUTH).mint("mallory", uuid.uuid4())
            async with http.get(
                base + "/state", headers={"Authorization": f"Bearer {stranger}"}
            ) as response:
                assert response.status == 404
    finally:
        await telemetry.stop()
        await fleet.unsubscribe()
