"""Who may do what: owner, group viewer, group operator, other account, revoked grant."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import aiohttp
import asyncpg
import pytest

from contracts.v1 import Connection, EventEnvelope, GrantsChanged, MowerRegistration
from mowdeck.authz import (
    Authorizer,
    Tuple,
    account_object,
    grant_tuples,
    group_object,
    mower_object,
    revoke_tuples,
)
from mowdeck.fleet import FleetService
from mowdeck.fleet.ports import MowerRecord
from mowdeck.fleet.postgres import PostgresMowerRepository
from mowdeck.fleet.rules import registry_event
from mowdeck.kit.bus import Bus
from tests.integration.fleet.conftest import Api, start_fleet
from tests.integration.fleet.test_commands import registered
from tests.integration.fleet.test_rest import owner
from tests.support.eventually import eventually


async def grants_changed(bus: Bus, account: uuid.UUID) -> None:
    """Announce changed grants the way the identity side does."""
    event = EventEnvelope.new(
        "identity.grants.changed",
        GrantsChanged(account_id=account),
        producer="tests",
        now=datetime.now(UTC),
    )
    await bus.publish_event(event)


def dropped(fleet: FleetService) -> float:
    """How often ``fleet`` dropped its caches on an event."""
    value = fleet.metrics_registry.get_sample_value("mowdeck_fleet_caches_dropped_total")
    return value or 0.0


async def eventually_status(api: Api, path: str, expected: int, within: float = 0.5) -> None:
    """Poll ``path`` until it answers ``expected`` (fails after ``within`` seconds)."""

    async def answers() -> bool:
        status, _ = await api.call("GET", path)
        return status == expected

    await eventually(answers, within, what=f"GET {path} answering {expected}")


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
        # The registration's own mower.registered comes back from the events relay on its own
        # time and drops the caches: the decision below must be cached after it.
        await eventually(lambda: dropped(fleet) >= 1, what="mower.registered seen by Fleet")
        await authorizer.write(grant_tuples(admin.account, "viewer-1", "viewer"))
        viewer = Api(http, fleet.url, "viewer-1", admin.account)
        path = f"/v1/mowers/{mower_id}"
        assert (await viewer.call("GET", path))[0] == 200
        await authorizer.write([], revoke_tuples(admin.account, "viewer-1", "viewer"))
        # Without the event the decision is reused for the cache's lifetime...
        assert (await viewer.call("GET", path))[0] == 200
        assert dropped(fleet) == 1  # (and no other event dropped it meanwhile)
        # ...and the event ends it.
        await grants_changed(bus, admin.account)
        await eventually_status(viewer, path, 404)
    finally:
        await fleet.stop()


async def test_an_unavailable_authorization_backend_is_503_with_retry_after(
    fleet: FleetService, pool: asyncpg.Pool, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    admin = await owner(http, fleet, authorizer)
    mower_id = await registered(admin)
    fresh = Api(http, fleet.url, f"u-{uuid.uuid4().hex[:8]}", admin.account)  # nothing cached
    body = {"name": "M", "connection": {"kind": "simulator"}}
    await pool.execute("ALTER TABLE authz_tuples RENAME TO authz_tuples_away")
    try:
        for method, path, payload in (
            ("GET", f"/v1/mowers/{mower_id}", None),
            ("GET", "/v1/mowers", None),
            ("POST", "/v1/mowers", body),
        ):
            async with http.request(
                method, fleet.url + path, json=payload, headers=fresh.headers
            ) as r:
                problem = await r.json(content_type=None)
                assert (r.status, r.headers.get("Retry-After")) == (503, "1"), (path, problem)
                assert r.content_type == "application/problem+json"
                assert problem["type"].endswith("/unavailable")
    finally:
        await pool.execute("ALTER TABLE authz_tuples_away RENAME TO authz_tuples")


async def _left_behind(
    http: aiohttp.ClientSession, fleet: FleetService, pool: asyncpg.Pool, authorizer: Authorizer
) -> tuple[Api, Api, str]:
    """A's mower id, deleted by A and registered by B, with A's tuple left behind and B's
    cleanup never done (as when both authorizer calls failed after their commits)."""
    a, b = await owner(http, fleet, authorizer), await owner(http, fleet, authorizer)
    mower_id = await registered(a)
    assert (await a.call("DELETE", f"/v1/mowers/{mower_id}"))[0] == 204
    await authorizer.write([Tuple(account_object(a.account), "account", mower_object(mower_id))])
    now = datetime.now(UTC)
    registration = MowerRegistration(
        mower_id=uuid.UUID(mower_id),
        account_id=b.account,
        name="M",
        connection=Connection(kind="simulator"),
    )
    await PostgresMowerRepository(pool).add(
        MowerRecord(registration, now, now),
        registry_event("mower.registered", registration, now=now),
    )
    return a, b, mower_id


async def test_a_retried_registration_of_a_reused_id_removes_the_previous_accounts_tuple(
    fleet: FleetService, pool: asyncpg.Pool, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    a, b, mower_id = await _left_behind(http, fleet, pool, authorizer)
    body = {"mower_id": mower_id, "name": "M", "connection": {"kind": "simulator"}}
    assert (await b.call("POST", "/v1/mowers", body))[0] == 200  # B's retry
    tuples = await authorizer.read(relation="account", object=mower_object(mower_id))
    assert tuples == [Tuple(account_object(b.account), "account", mower_object(mower_id))]
    assert (await b.call("GET", f"/v1/mowers/{mower_id}"))[0] == 200
    assert (await a.call("GET", f"/v1/mowers/{mower_id}"))[0] == 404


async def test_a_tuple_left_on_another_accounts_mower_opens_no_route(
    fleet: FleetService, pool: asyncpg.Pool, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    a, b, mower_id = await _left_behind(http, fleet, pool, authorizer)
    path = f"/v1/mowers/{mower_id}"
    assert (await a.call("GET", path))[0] == 404
    _, listed = await a.call("GET", "/v1/mowers")
    assert mower_id not in [m["mower_id"] for m in listed["mowers"]]
    assert (await a.call("PATCH", path, {"name": "Mine"}))[0] == 404
    status, _ = await a.call("POST", f"{path}/commands", {"command": {"kind": "start_mow"}})
    assert status == 404
    assert (await a.call("DELETE", path))[0] == 404
    # B's mower is untouched.
    record = await PostgresMowerRepository(pool).get(uuid.UUID(mower_id))
    assert record is not None
    assert (record.registration.name, record.registration.account_id) == ("M", b.account)
