"""Who may do what: owner, group viewer, group operator, other account, revoked grant."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import aiohttp
import asyncpg
import pytest

from contracts.v1 import EventEnvelope, GrantsChanged
from mowdeck.authz import Authorizer, Tuple, grant_tuples, group_object, mower_object, revoke_tuples
from mowdeck.fleet import FleetService
from mowdeck.kit.bus import Bus
from tests.integration.fleet.conftest import Api, start_fleet
from tests.integration.fleet.test_commands import registered
from tests.integration.fleet.test_rest import owner


async def grants_changed(bus: Bus, account: uuid.UUID) -> None:
    """Announce changed grants the way the identity side does."""
    event = EventEnvelope.new(
        "identity.grants.changed",
        GrantsChanged(account_id=account),
        producer="tests",
        now=datetime.now(UTC),
    )
    await bus.publish_event(event)


async def eventually_status(api: Api, path: str, expected: int, within: float = 0.5) -> None:
    """Poll ``path`` until it answers ``expected`` (fails after ``within`` seconds)."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        status, _ = await api.call("GET", path)
        if status == expected or asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.02)
    assert status == expected


# Expected status per role: view one, list (is it in?), command, rename, remove.
MATRIX = {
    "owner": (200, True, 202, 200, 204),
    "group_viewer": (200, True, 403, 403, 403),
    "group_operator": (200, True, 202, 403, 403),
    "other_account": (404, False, 404, 404, 404),
    "revoked_operator": (404, False, 404, 404, 404),
}


@pytest.mark.parametrize("role", list(MATRIX), ids=list(MATRIX))
async def test_route_matrix(
    role: str,
    fleet: FleetService,
    bus: Bus,
    authorizer: Authorizer,
    http: aiohttp.ClientSession,
) -> None:
    admin = await owner(http, fleet, authorizer)
    mower_id = await registered(admin)
    group = f"g-{uuid.uuid4().hex[:8]}"
    await authorizer.write([Tuple(group_object(group), "group", mower_object(mower_id))])
    user = f"u-{uuid.uuid4().hex[:8]}"
    if role == "owner":
        api = admin
    elif role == "other_account":
        api = await owner(http, fleet, authorizer)
    else:
        group_role = "viewer" if role == "group_viewer" else "operator"
        await authorizer.write(grant_tuples(admin.account, user, group_role, group))
        api = Api(http, fleet.url, user, admin.account)
        if role == "revoked_operator":
            # Seen once while granted (so a cached decision exists), then revoked.
            assert (await api.call("GET", f"/v1/mowers/{mower_id}"))[0] == 200
            await authorizer.write([], revoke_tuples(admin.account, user, group_role, group))
            await grants_changed(bus, admin.account)
            await eventually_status(api, f"/v1/mowers/{mower_id}", 404)
    view, listed, command, rename, remove = MATRIX[role]
    assert (await api.call("GET", f"/v1/mowers/{mower_id}"))[0] == view
    _, body = await api.call("GET", "/v1/mowers")
    assert (mower_id in [m["mower_id"] for m in body["mowers"]]) is listed
    status, _ = await api.call(
        "POST", f"/v1/mowers/{mower_id}/commands", {"command": {"kind": "return_to_dock"}}
    )
    assert status == command
    assert (await api.call("PATCH", f"/v1/mowers/{mower_id}", {"name": "Renamed"}))[0] == rename
    assert (await api.call("DELETE", f"/v1/mowers/{mower_id}"))[0] == remove


async def test_registering_needs_the_account_admin_role(
    fleet: FleetService, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    account = uuid.uuid4()
    operator = Api(http, fleet.url, "op", account)
    await authorizer.write(grant_tuples(account, "op", "operator"))
    stranger = Api(http, fleet.url, "nobody", account)
    body = {"name": "M", "connection": {"kind": "simulator"}}
    assert (await operator.call("POST", "/v1/mowers", body))[0] == 403
    assert (await stranger.call("POST", "/v1/mowers", body))[0] == 403


async def test_a_removed_mower_leaves_no_grants_behind(
    fleet: FleetService, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    admin = await owner(http, fleet, authorizer)
    mower_id = await registered(admin)
    assert (await admin.call("DELETE", f"/v1/mowers/{mower_id}"))[0] == 204
    assert await authorizer.read(object=mower_object(mower_id)) == []
    # The id can be registered again by another account, which alone sees it.
    other = await owner(http, fleet, authorizer)
    body = {"mower_id": mower_id, "name": "Again", "connection": {"kind": "simulator"}}
    assert (await other.call("POST", "/v1/mowers", body))[0] == 201
    assert (await admin.call("GET", f"/v1/mowers/{mower_id}"))[0] == 404
    assert (await other.call("GET", f"/v1/mowers/{mower_id}"))[0] == 200


async def test_grants_changed_clears_cached_decisions_at_once(
    bus: Bus, pool: asyncpg.Pool, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    fleet = await start_fleet(bus, pool, authorizer, fleet_cache_seconds=60.0)
    try:
        admin = await owner(http, fleet, authorizer)
        mower_id = await registered(admin)
        await authorizer.write(grant_tuples(admin.account, "viewer-1", "viewer"))
        viewer = Api(http, fleet.url, "viewer-1", admin.account)
        path = f"/v1/mowers/{mower_id}"
        assert (await viewer.call("GET", path))[0] == 200
        await authorizer.write([], revoke_tuples(admin.account, "viewer-1", "viewer"))
        # Without the event the decision is reused for the cache's lifetime...
        assert (await viewer.call("GET", path))[0] == 200
        # ...and the event ends it.
        await grants_changed(bus, admin.account)
        await eventually_status(viewer, path, 404)
    finally:
        await fleet.stop()
