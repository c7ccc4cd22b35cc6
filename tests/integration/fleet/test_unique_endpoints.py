"""One registration per device endpoint: a 409 that names no holder, and rows from before.

The module's database is migrated to 0004 first and given two mowers with one endpoint,
as a registry held them before endpoints were unique; 0005 must apply over them.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import asyncpg
import pytest
import structlog

from contracts.v1 import MowerListRequest
from mowdeck.authz import Authorizer, grant_tuples
from mowdeck.fleet import FleetService
from mowdeck.kit.bus import Bus
from mowdeck.kit.migrate import discover, migrate, sql_root
from mowdeck.kit.seed import list_mowers
from tests.integration.fleet.conftest import Api, start_fleet

EARLIER, LATER, ELSEWHERE = (uuid.UUID(int=n) for n in (0xE1, 0xE2, 0xE3))
SHARED_DEVICE = f"ws://127.0.0.1:8090/mowers/{EARLIER}/ws"


async def _rows_from_before(url: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        then = datetime(2026, 1, 1, tzinfo=UTC)
        for mower_id, device, at in (
            (EARLIER, SHARED_DEVICE, then),
            # The same device written differently, registered a day later.
            (LATER, SHARED_DEVICE.replace("127.0.0.1", "[::ffff:127.0.0.1]"), then + timedelta(1)),
            (ELSEWHERE, "ws://127.0.0.1:8090/mowers/elsewhere/ws", then + timedelta(2)),
        ):
            await conn.execute(
                "INSERT INTO fleet_mowers (mower_id, account_id, name, connection_kind,"
                " connection_options, created_at, updated_at)"
                " VALUES ($1, $2, 'before', 'simulator', $3, $4, $4)",
                mower_id,
                uuid.uuid4(),
                f'{{"url": "{device}"}}',
                at,
            )
    finally:
        await conn.close()


@pytest.fixture(scope="module")
def fleet_db(database_url: str) -> str:
    """Migrated to 0004, two mowers sharing a device stored, then migrated to the end."""
    migrations = discover(sql_root(), ["fleet", "authz"])
    before = [m for m in migrations if m.service != "fleet" or m.version < 5]  # 0005: the keys
    asyncio.run(migrate(database_url, before))
    asyncio.run(_rows_from_before(database_url))
    applied = asyncio.run(migrate(database_url, migrations))
    assert ("fleet", 5) in [(m.service, m.version) for m in applied]
    return database_url


async def _owner(http: aiohttp.ClientSession, fleet: FleetService, authorizer: Authorizer) -> Api:
    api = Api(http, fleet.url, f"owner-{uuid.uuid4().hex[:6]}", uuid.uuid4())
    await authorizer.write(grant_tuples(api.account, api.user, "admin"))
    return api


def _simulator(url: str, **options: Any) -> dict[str, Any]:
    return {"kind": "simulator", "options": {"url": url, **options}}


async def test_a_registered_endpoint_is_409_for_anyone_else_and_names_no_holder(
    fleet: FleetService, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    mine, theirs = await _owner(http, fleet, authorizer), await _owner(http, fleet, authorizer)
    device = uuid.uuid4()
    url = f"ws://127.0.0.1:8090/mowers/{device}/ws"
    status, held = await mine.call(
        "POST", "/v1/mowers", {"name": "A", "connection": _simulator(url)}
    )
    assert status == 201
    # The same device written differently, from another account and from the holder's own.
    spelled = f"WS://[::ffff:127.0.0.1]:8090/mowers/{str(device).upper()}/ws"
    answers = []
    for api in (theirs, mine):
        body = {"name": "B", "connection": _simulator(spelled)}
        async with http.post(f"{fleet.url}/v1/mowers", json=body, headers=api.headers) as r:
            assert r.status == 409
            assert r.content_type == "application/problem+json"
            answers.append(await r.json(content_type=None))
    assert answers[0] == answers[1]  # nothing tells the two apart
    problem = answers[0]
    assert (problem["type"].rsplit("/", 1)[-1], problem["field"]) == (
        "endpoint-taken",
        "connection.options.url",
    )
    text = str(problem)
    assert held["mower_id"] not in text
    assert str(mine.account) not in text
    assert str(device) not in text.lower()

    # Moving another mower onto it is refused as well, and changes nothing.
    other = f"ws://127.0.0.1:8090/mowers/{uuid.uuid4()}/ws"
    status, mover = await theirs.call(
        "POST", "/v1/mowers", {"name": "C", "connection": _simulator(other)}
    )
    assert status == 201
    path = f"/v1/mowers/{mover['mower_id']}"
    status, refused = await theirs.call("PATCH", path, {"connection": _simulator(url)})
    assert (status, refused) == (409, {**problem, "instance": path})
    assert (await theirs.call("GET", path))[1]["connection"] == _simulator(other)

    # The holder renames its mower and changes options of the same endpoint: fine.
    mine_path = f"/v1/mowers/{held['mower_id']}"
    assert (await mine.call("PATCH", mine_path, {"name": "A2"}))[0] == 200
    again = _simulator(url, heartbeat_seconds=20)
    assert (await mine.call("PATCH", mine_path, {"connection": again}))[0] == 200

    # Removing the holder frees the endpoint.
    assert (await mine.call("DELETE", mine_path))[0] == 204
    assert (await theirs.call("PATCH", path, {"connection": _simulator(spelled)}))[0] == 200


async def test_a_long_device_url_is_held_like_any_other(
    fleet: FleetService, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    # Longer than a btree index entry holds: the key is its digest, not a 503.
    api = await _owner(http, fleet, authorizer)
    url = f"ws://127.0.0.1:8090/mowers/{uuid.uuid4()}/" + "a" * 6000
    body = {"name": "M", "connection": _simulator(url)}
    assert (await api.call("POST", "/v1/mowers", body))[0] == 201
    assert (await api.call("POST", "/v1/mowers", body))[0] == 409


async def test_a_repeated_registration_is_still_answered_again(
    fleet: FleetService, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    api = await _owner(http, fleet, authorizer)
    url = f"ws://127.0.0.1:8090/mowers/{uuid.uuid4()}/ws"
    body = {"mower_id": str(uuid.uuid4()), "name": "M", "connection": _simulator(url)}
    assert (await api.call("POST", "/v1/mowers", body))[0] == 201
    assert (await api.call("POST", "/v1/mowers", body))[0] == 200


async def test_rows_from_before_keep_the_earliest_registration_linkable(
    bus: Bus, pool: asyncpg.Pool, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    with structlog.testing.capture_logs() as logs:
        fleet = await start_fleet(bus, pool, authorizer)
    try:
        unlinkable = [e for e in logs if e["event"].startswith("mower not linkable")]
        assert [(e["mower_id"], e["holder"]) for e in unlinkable] == [(str(LATER), str(EARLIER))]
        # The gateways are not told of the later one, so none dials the device twice.
        listed = {r.mower_id for r in await list_mowers(bus, MowerListRequest(), timeout=5)}
        assert {EARLIER, ELSEWHERE} <= listed
        assert LATER not in listed
        keys = dict(await pool.fetch("SELECT mower_id, endpoint_key FROM fleet_mowers"))
        assert keys[EARLIER] == f"simulator {SHARED_DEVICE}"
        assert keys[LATER] is None
        # And the earliest holds it against new registrations too.
        api = await _owner(http, fleet, authorizer)
        body = {"name": "N", "connection": _simulator(SHARED_DEVICE)}
        assert (await api.call("POST", "/v1/mowers", body))[0] == 409
    finally:
        await fleet.stop()


async def test_one_broker_holds_many_openmowers_one_per_prefix_and_bad_options_are_named(
    fleet: FleetService, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    api = await _owner(http, fleet, authorizer)
    broker = "mqtt://127.0.0.1:8090"  # an allowed host of the test's Fleet

    def openmower(**options: Any) -> dict[str, Any]:
        return {"name": "OM", "connection": {"kind": "openmower", "options": options}}

    prefix = uuid.uuid4().hex[:8]
    first = openmower(broker=broker, prefix=f"{prefix}/om1", credentials="yard")
    status, made = await api.call("POST", "/v1/mowers", first)
    assert status == 201, (made.get("field"), made.get("detail"))
    second = openmower(broker=broker, prefix=f"{prefix}/om2")
    assert (await api.call("POST", "/v1/mowers", second))[0] == 201
    # The first mower's prefix written with its trailing slash is the same device.
    same = openmower(broker=broker + "/", prefix=f"{prefix}/om1/")
    status, problem = await api.call("POST", "/v1/mowers", same)
    assert (status, problem["field"]) == (409, "connection.options.broker")

    bad = openmower(broker=broker, prefix=f"{prefix}/om3", datum={"lat": 95, "lon": 0})
    status, problem = await api.call("POST", "/v1/mowers", bad)
    assert (status, problem["field"]) == (422, "connection.options.datum.lat")
    secret = openmower(broker="mqtt://user:pw@127.0.0.1:8090", prefix=f"{prefix}/om4")
    status, problem = await api.call("POST", "/v1/mowers", secret)
    assert (status, problem["field"]) == (422, "connection.options.broker")
    elsewhere = openmower(broker="mqtt://10.9.9.9:1883", prefix=f"{prefix}/om5")
    status, problem = await api.call("POST", "/v1/mowers", elsewhere)
    assert status == 422
    assert "MOWDECK_GATEWAY_DEVICE_HOSTS does not allow" in problem["detail"]


async def test_an_automower_is_held_by_its_vendor_id_and_bad_options_are_named(
    fleet: FleetService, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    api = await _owner(http, fleet, authorizer)

    def automower(**options: Any) -> dict[str, Any]:
        return {"name": "AM", "connection": {"kind": "automower", "options": options}}

    vendor_id = str(uuid.uuid4())
    # Fleet checks the credential's name only; no such file exists anywhere.
    first = automower(vendor_id=vendor_id, credentials="husqvarna-main")
    status, made = await api.call("POST", "/v1/mowers", first)
    assert status == 201, (made.get("field"), made.get("detail"))
    # The same vendor id under another credential is the same mower.
    again = automower(vendor_id=vendor_id, credentials="husqvarna-other")
    status, problem = await api.call("POST", "/v1/mowers", again)
    assert (status, problem["field"]) == (409, "connection.options.vendor_id")

    missing = automower(vendor_id=str(uuid.uuid4()))
    status, problem = await api.call("POST", "/v1/mowers", missing)
    assert (status, problem["field"]) == (422, "connection.options.credentials")
    path = automower(vendor_id="../../users", credentials="husqvarna-main")
    status, problem = await api.call("POST", "/v1/mowers", path)
    assert (status, problem["field"]) == (422, "connection.options.vendor_id")
    secret = automower(vendor_id=str(uuid.uuid4()), credentials="a", client_secret="s")
    status, problem = await api.call("POST", "/v1/mowers", secret)
    assert status == 422
    assert "client_secret" in problem["detail"]
