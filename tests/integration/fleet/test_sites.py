"""Sites over HTTP on real NATS and PostgreSQL: CRUD, areas, a mower's site, members, and
the events and the ``fleet.sites.areas`` answers that go with them."""

from __future__ import annotations

import json
import uuid
from typing import Any

import aiohttp

from contracts.v1 import SiteAreasReply, SiteAreasRequest, decode, decode_event, encode
from contracts.v1.subjects import FLEET_SITES_AREAS
from mowdeck.authz import Authorizer, Tuple, grant_tuples, mower_object, site_object
from mowdeck.fleet import FleetService
from mowdeck.kit.bus import Bus
from tests.integration.fleet.conftest import Api
from tests.integration.fleet.test_commands import registered
from tests.integration.fleet.test_rest import owner

SQUARE = [[13.4, 52.5], [13.401, 52.5], [13.401, 52.501], [13.4, 52.501], [13.4, 52.5]]
BOWTIE = [[13.4, 52.5], [13.401, 52.501], [13.401, 52.5], [13.4, 52.501], [13.4, 52.5]]
SITE = {"name": "Riverside", "timezone": "Europe/Berlin", "location": {"lat": 52.5, "lon": 13.4}}


def area(name: str, kind: str = "work_area", ring: list[list[float]] = SQUARE) -> dict[str, Any]:
    return {
        "type": "Feature",
        "properties": {"name": name, "kind": kind},
        "geometry": {"type": "Polygon", "coordinates": [ring]},
    }


async def site_of(api: Api, **over: Any) -> str:
    status, body = await api.call("POST", "/v1/sites", {**SITE, **over})
    assert status == 201, body
    return str(body["site_id"])


async def site_events(bus: Bus, site_id: str, count: int) -> list[Any]:
    """The first ``count`` events of a site in the EVENTS stream."""
    sub = await bus.js.subscribe("event.site.>", ordered_consumer=True)
    found = []
    try:
        while len(found) < count:
            msg = await sub.next_msg(timeout=5)
            event = decode_event(msg.data)
            if str(event.payload.site_id) == site_id:
                found.append(event)
    finally:
        await sub.unsubscribe()
    return found


async def test_a_site_is_created_read_listed_changed_and_removed(
    fleet: FleetService, bus: Bus, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    admin = await owner(http, fleet, authorizer)
    site_id = await site_of(admin)
    await site_of(admin, name="Allotment")
    status, got = await admin.call("GET", f"/v1/sites/{site_id}")
    assert (status, got["timezone"], got["location"]) == (200, "Europe/Berlin", SITE["location"])
    status, page = await admin.call("GET", "/v1/sites?limit=1")
    assert (status, [s["name"] for s in page["sites"]], page["has_more"]) == (
        200,
        ["Allotment"],
        True,
    )
    status, rest = await admin.call("GET", f"/v1/sites?limit=1&after={page['next_after']}")
    assert ([s["site_id"] for s in rest["sites"]], rest["has_more"]) == ([site_id], False)
    status, changed = await admin.call("PATCH", f"/v1/sites/{site_id}", {"timezone": "UTC"})
    assert (status, changed["timezone"], changed["name"]) == (200, "UTC", "Riverside")
    assert (await admin.call("DELETE", f"/v1/sites/{site_id}"))[0] == 204
    assert (await admin.call("GET", f"/v1/sites/{site_id}"))[0] == 404
    events = await site_events(bus, site_id, 3)
    assert [e.type for e in events] == ["site.created", "site.updated", "site.removed"]
    assert await authorizer.read(object=site_object(site_id)) == []


async def test_bad_sites_are_refused_naming_the_field(
    fleet: FleetService, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    admin = await owner(http, fleet, authorizer)
    cases = [
        ({**SITE, "timezone": "Mars/Base"}, "timezone"),
        ({**SITE, "location": {"lat": 95, "lon": 0}}, "location.lat"),
        ({"name": "X", "timezone": "UTC"}, "location"),
    ]
    for body, field in cases:
        status, problem = await admin.call("POST", "/v1/sites", body)
        assert (status, problem["field"]) == (422, field), problem
    site_id = await site_of(admin)
    status, problem = await admin.call("PATCH", f"/v1/sites/{site_id}", {})
    assert status == 400


async def test_only_the_accounts_admins_change_sites(
    fleet: FleetService, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    admin = await owner(http, fleet, authorizer)
    site_id = await site_of(admin)
    viewer = Api(http, fleet.url, f"v-{uuid.uuid4().hex[:6]}", admin.account)
    await authorizer.write(grant_tuples(admin.account, viewer.user, "viewer"))
    stranger = await owner(http, fleet, authorizer)
    path = f"/v1/sites/{site_id}"
    areas = {"type": "FeatureCollection", "features": []}
    assert (await viewer.call("GET", path))[0] == 200
    assert (await viewer.call("GET", f"{path}/areas"))[0] == 200
    _, listed = await viewer.call("GET", "/v1/sites")
    assert [s["site_id"] for s in listed["sites"]] == [site_id]
    assert (await viewer.call("POST", "/v1/sites", SITE))[0] == 403
    assert (await viewer.call("PATCH", path, {"name": "Mine"}))[0] == 403
    assert (await viewer.call("PUT", f"{path}/areas", areas))[0] == 403
    assert (await viewer.call("PUT", f"{path}/members/x", {"role": "viewer"}))[0] == 403
    assert (await viewer.call("DELETE", path))[0] == 403
    for method, body in (("GET", None), ("PATCH", {"name": "Mine"}), ("DELETE", None)):
        assert (await stranger.call(method, path, body))[0] == 404
    assert (await stranger.call("GET", f"{path}/areas"))[0] == 404
    _, theirs = await stranger.call("GET", "/v1/sites")
    assert theirs["sites"] == []


async def test_areas_are_validated_versioned_published_and_listed(
    fleet: FleetService, bus: Bus, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    admin = await owner(http, fleet, authorizer)
    site_id = await site_of(admin)
    path = f"/v1/sites/{site_id}/areas"
    _, before = await admin.call("GET", path)
    assert (before["version"], before["features"]) == (0, [])
    good = {"type": "FeatureCollection", "features": [area("Lawn"), area("Pond", "stay_out")]}
    status, stored = await admin.call("PUT", path, good)
    assert (status, stored["version"]) == (200, 1)
    bad = {"type": "FeatureCollection", "features": [area("Lawn"), area("Bowtie", ring=BOWTIE)]}
    status, problem = await admin.call("PUT", path, bad)
    assert status == 422
    assert (problem["type"].endswith("invalid-area"), problem["feature"], problem["name"]) == (
        True,
        1,
        "Bowtie",
    )
    assert "Self-intersection" in problem["detail"]
    _, got = await admin.call("GET", path)
    assert got["version"] == 1
    assert [f["properties"] for f in got["features"]] == [
        {"name": "Lawn", "kind": "work_area"},
        {"name": "Pond", "kind": "stay_out"},
    ]
    assert got["features"][0]["geometry"]["coordinates"] == [SQUARE]
    empty = json.dumps({"type": "FeatureCollection", "features": []}).encode()
    geojson = {"Content-Type": "application/geo+json"}
    status, again = await admin.call("PUT", path, raw=empty, headers=geojson)
    assert (status, again["version"]) == (200, 2)
    deep = b"[" * 100 + b"]" * 100
    status, problem = await admin.call("PUT", path, raw=deep, headers=geojson)
    assert (status, problem["type"].rsplit("/", 1)[-1]) == (400, "too-deep")
    changed = [e for e in await site_events(bus, site_id, 3) if e.type == "site.areas_changed"]
    assert [(e.payload.version, len(e.payload.areas)) for e in changed] == [(1, 2), (2, 0)]
    # fleet.sites.areas pages through every site; this one is in it at its last version.
    after, seen = None, {}
    while True:
        msg = await bus.nc.request(
            FLEET_SITES_AREAS, encode(SiteAreasRequest(after=after, limit=50)), timeout=5
        )
        reply = decode(msg.data, SiteAreasReply)
        seen.update({str(s.site_id): s for s in reply.sites})
        if reply.next_after is None:
            break
        after = reply.next_after
    assert (seen[site_id].version, seen[site_id].areas) == (2, [])


async def test_a_mower_joins_and_leaves_a_site(
    fleet: FleetService, bus: Bus, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    admin = await owner(http, fleet, authorizer)
    other = await owner(http, fleet, authorizer)
    site_id, foreign = await site_of(admin), await site_of(other)
    mower_id = await registered(admin)
    path = f"/v1/mowers/{mower_id}"
    status, problem = await admin.call("PATCH", path, {"site_id": foreign})
    assert (status, problem["field"]) == (422, "site_id")
    status, joined = await admin.call("PATCH", path, {"site_id": site_id})
    assert (status, joined["site_id"]) == (200, site_id)
    tuples = await authorizer.read(relation="site", object=mower_object(mower_id))
    assert [t.user for t in tuples] == [site_object(site_id)]
    status, left = await admin.call("PATCH", path, {"site_id": None})
    assert (status, left["site_id"], left["name"]) == (200, None, "M")
    assert await authorizer.read(relation="site", object=mower_object(mower_id)) == []
    assert (await admin.call("PATCH", path, {"site_id": site_id}))[0] == 200
    member = f"/v1/sites/{site_id}/members/sue"
    assert (await admin.call("PUT", member, {"role": "operator"}))[0] == 204
    # A tuple a failed write left behind is mended by the next PATCH naming the site.
    stale = Tuple(site_object(foreign), "site", mower_object(mower_id))
    await authorizer.write([stale])
    assert (await admin.call("PATCH", path, {"site_id": site_id}))[0] == 200
    tuples = await authorizer.read(relation="site", object=mower_object(mower_id))
    assert [t.user for t in tuples] == [site_object(site_id)]
    assert (await admin.call("DELETE", f"/v1/sites/{site_id}"))[0] == 204
    assert await authorizer.read(object=site_object(site_id)) == []
    _, after = await admin.call("GET", path)
    assert after["site_id"] is None
    assert await authorizer.read(relation="site", object=mower_object(mower_id)) == []
    sub = await bus.js.subscribe("event.mower.updated", ordered_consumer=True)
    sites_seen = []
    try:
        while len(sites_seen) < 3:
            event = decode_event((await sub.next_msg(timeout=5)).data)
            if str(event.payload.mower_id) == mower_id:
                sites_seen.append(event.payload.site_id)
    finally:
        await sub.unsubscribe()
    assert [None if s is None else str(s) for s in sites_seen] == [site_id, None, site_id]


async def test_a_site_member_sees_and_commands_exactly_the_sites_mowers(
    fleet: FleetService, bus: Bus, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    admin = await owner(http, fleet, authorizer)
    site_id, elsewhere = await site_of(admin), await site_of(admin, name="Elsewhere")
    at_site, other = await registered(admin), await registered(admin)
    assert (await admin.call("PATCH", f"/v1/mowers/{at_site}", {"site_id": site_id}))[0] == 200
    sam = Api(http, fleet.url, f"sam-{uuid.uuid4().hex[:6]}", admin.account)
    members = f"/v1/sites/{site_id}/members"
    assert (await admin.call("PUT", f"{members}/{sam.user}", {"role": "viewer"}))[0] == 204
    _, listed = await admin.call("GET", members)
    assert listed["members"] == [{"user_id": sam.user, "role": "viewer"}]
    _, mowers = await sam.call("GET", "/v1/mowers")
    assert [m["mower_id"] for m in mowers["mowers"]] == [at_site]
    _, sites = await sam.call("GET", "/v1/sites")
    assert [s["site_id"] for s in sites["sites"]] == [site_id]
    assert (await sam.call("GET", f"/v1/mowers/{other}"))[0] == 404
    assert (await sam.call("GET", f"/v1/sites/{elsewhere}"))[0] == 404
    command = {"command": {"kind": "return_to_dock"}}
    assert (await sam.call("POST", f"/v1/mowers/{at_site}/commands", command))[0] == 403
    assert (await admin.call("PUT", f"{members}/{sam.user}", {"role": "operator"}))[0] == 204
    assert (await sam.call("POST", f"/v1/mowers/{at_site}/commands", command))[0] == 202
    assert (await sam.call("POST", f"/v1/mowers/{other}/commands", command))[0] == 404
    _, listed = await admin.call("GET", members)
    assert listed["members"] == [{"user_id": sam.user, "role": "operator"}]
    assert (await admin.call("PUT", f"{members}/{sam.user}", {"role": "admin"}))[0] == 422
    assert (await admin.call("DELETE", f"{members}/{sam.user}"))[0] == 204
    _, mowers = await sam.call("GET", "/v1/mowers")
    assert mowers["mowers"] == []
    sub = await bus.js.subscribe("event.identity.grants.changed", ordered_consumer=True)
    objects = []
    try:
        while len(objects) < 4:
            event = decode_event((await sub.next_msg(timeout=5)).data)
            if event.account_id == uuid.UUID(str(admin.account)):
                objects.append((event.payload.object, event.payload.user_id))
    finally:
        await sub.unsubscribe()
    site = site_object(site_id)
    assert objects == [
        (mower_object(at_site), None),
        (site, sam.user),
        (site, sam.user),
        (site, sam.user),
    ]


async def test_a_site_member_reads_the_audit_of_the_sites_mowers_only(
    fleet: FleetService, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    admin = await owner(http, fleet, authorizer)
    site_id = await site_of(admin)
    at_site, other = await registered(admin), await registered(admin)
    status, _ = await admin.call("PATCH", f"/v1/mowers/{at_site}", {"site_id": site_id})
    assert status == 200
    viewer = Api(http, fleet.url, f"sv-{uuid.uuid4().hex[:6]}", admin.account)
    path = f"/v1/sites/{site_id}/members/{viewer.user}"
    assert (await admin.call("PUT", path, {"role": "viewer"}))[0] == 204
    command = {"command": {"kind": "return_to_dock"}}
    ids = {}
    for mower in (at_site, other):
        status, body = await admin.call("POST", f"/v1/mowers/{mower}/commands", command)
        assert status == 202
        ids[mower] = body["command_id"]
    status, page = await viewer.call("GET", "/v1/audit")
    assert status == 200
    assert [c["command_id"] for c in page["commands"]] == [ids[at_site]]
    status, page = await viewer.call("GET", f"/v1/audit?mower={other}")
    assert (status, page["commands"]) == (200, [])
    async with http.get(fleet.url + "/v1/audit/export", headers=viewer.headers) as r:
        lines = (await r.read()).decode().splitlines()
    assert (r.status, [json.loads(line)["command_id"] for line in lines]) == (
        200,
        [ids[at_site]],
    )
    _, whole = await admin.call("GET", "/v1/audit")
    assert {c["command_id"] for c in whole["commands"]} == set(ids.values())
    # Without a site role (an account operator) the trail stays the admins'.
    operator = Api(http, fleet.url, f"op-{uuid.uuid4().hex[:6]}", admin.account)
    await authorizer.write(grant_tuples(admin.account, operator.user, "operator"))
    assert (await operator.call("GET", "/v1/audit"))[0] == 403
    assert (await admin.call("DELETE", path))[0] == 204
    assert (await viewer.call("GET", "/v1/audit"))[0] == 403
