"""OpenMower end to end: stand-in on Mosquitto -> gateway -> NATS -> Telemetry -> HTTP.

A stand-in OpenMower is linked by a gateway shard through a real broker, commanded to
mow through the bus, and its latest state read back from Telemetry with a real token.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest

from contracts.v1 import CommandEnvelope, Connection, MowerRegistration, StartMow
from mowdeck.authn import TokenIssuer, TokenVerifier
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
from simulator.openmower import StandInOpenMower
from tests.e2e.test_telemetry_e2e import AUTH, _answer_fleet, _get
from tests.integration.gateway.conftest import running_gateway, settings_for
from tests.support.eventually import eventually
from tests.support.mosquitto import Mosquitto
from tests.support.natsserver import NatsServer
from tests.support.openmower import broker, openmower  # noqa: F401 - fixtures

ACCOUNT = uuid.UUID("00000000-0000-4000-8000-0000000e2e07")

pytestmark = pytest.mark.timeout(60)


async def test_an_openmowers_latest_state_is_read_back_from_telemetry(
    nats_server: NatsServer,
    bus: Bus,
    database_url: str,
    broker: Mosquitto,  # noqa: F811 - the fixture
    openmower: StandInOpenMower,  # noqa: F811 - the fixture
) -> None:
    await migrate(database_url, discover(sql_root(), ["authz", "telemetry"]))
    mower = MowerRegistration(
        mower_id=uuid.uuid4(),
        account_id=ACCOUNT,
        name="OpenMower",
        connection=Connection(
            kind="openmower",
            options={
                "broker": broker.url,
                "prefix": openmower.topics.prefix,
                "datum": {"lat": 48.1642, "lon": 11.6052},
            },
        ),
    )
    fleet = await _answer_fleet(bus, [mower])
    authorizer = LocalAuthorizer(InMemoryTupleStore())
    await authorizer.write(
        [
            *grant_tuples(ACCOUNT, "erin", "viewer"),
            Tuple(account_object(ACCOUNT), "account", mower_object(mower.mower_id)),
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
    try:
        async with (
            running_gateway(settings_for(nats_server.url, [mower])) as gateway,
            aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http,
        ):
            await eventually(lambda: all(c.connected for c in gateway.connections.values()))
            base = f"{telemetry.url}/v1/mowers/{mower.mower_id}"
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
            assert state["raw"]["openmower.current_state"] == "MOWING"
            assert state["rtk_fix"] == "fixed"
            assert abs(state["position"]["lat"] - 48.1642) < 0.001

            async def executed() -> Any:
                _, body = await _get(http, base + "/commands")
                mine = [
                    r["status"] for r in body["items"] if r["command_id"] == str(start.command_id)
                ]
                return mine if "executed" in mine else None

            statuses = await eventually(executed, timeout=10)
            assert statuses == ["accepted", "executed"]
    finally:
        await telemetry.stop()
        await fleet.unsubscribe()
