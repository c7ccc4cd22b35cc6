"""The schedule API on a running Fleet: set, read, refuse overlaps, park, restrict."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import aiohttp
import asyncpg

from mowdeck.authz import Authorizer, grant_tuples
from mowdeck.fleet import FleetService
from tests.integration.fleet.conftest import Api
from tests.integration.fleet.test_commands import registered
from tests.integration.fleet.test_rest import owner

WEEKDAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


async def test_a_schedule_is_set_read_and_refused_when_tasks_overlap(
    http: aiohttp.ClientSession, fleet: FleetService, authorizer: Authorizer
) -> None:
    api = await owner(http, fleet, authorizer)
    mower = await registered(api)
    path = f"/v1/mowers/{mower}/schedule"
    status, body = await api.call("GET", path)  # never given one: an empty one, disabled
    assert (status, body["enabled"], body["tasks"], body["next_start"]) == (200, False, [], None)
    task = {"start": "08:30", "duration_minutes": 90, "days": WEEKDAYS, "work_area": "front"}
    status, body = await api.call("PUT", path, {"enabled": True, "tasks": [task]})
    assert (status, body["field"]) == (422, "timezone")  # no site: the body names the zone
    overlapping = [task, {"start": "09:00", "duration_minutes": 10, "days": ["wed"]}]
    status, body = await api.call(
        "PUT", path, {"enabled": True, "tasks": overlapping, "timezone": "Europe/Berlin"}
    )
    assert (status, body["field"]) == (422, "tasks.1")
    assert "`tasks[0]` and `tasks[1]`" in body["detail"]
    status, body = await api.call(
        "PUT", path, {"enabled": True, "tasks": [task], "timezone": "Mars/Olympus"}
    )
    assert (status, body["field"]) == (422, "timezone")
    status, body = await api.call(
        "PUT", path, {"enabled": True, "tasks": [task], "timezone": "Europe/Berlin"}
    )
    assert status == 200, body
    status, body = await api.call("GET", path)
    assert status == 200
    assert body["timezone"] == "Europe/Berlin"
    assert body["tasks"] == [task]
    assert body["restricted"] is None
    start = datetime.fromisoformat(body["next_start"])
    assert datetime.now(UTC) - timedelta(minutes=1) < start < datetime.now(UTC) + timedelta(days=1)


async def test_a_viewer_reads_but_may_not_park(
    http: aiohttp.ClientSession, fleet: FleetService, authorizer: Authorizer
) -> None:
    api = await owner(http, fleet, authorizer)
    mower = await registered(api)
    task = {"start": "08:30", "duration_minutes": 90, "days": ["mon"]}
    body = {"enabled": True, "tasks": [task], "timezone": "UTC"}
    assert (await api.call("PUT", f"/v1/mowers/{mower}/schedule", body))[0] == 200
    viewer = Api(http, fleet.url, f"viewer-{uuid.uuid4().hex[:6]}", api.account)
    await authorizer.write(grant_tuples(api.account, viewer.user, "viewer"))
    assert (await viewer.call("GET", f"/v1/mowers/{mower}/schedule"))[0] == 200
    status, _ = await viewer.call(
        "POST", f"/v1/mowers/{mower}/schedule/override", {"override": "park_until_further_notice"}
    )
    assert status == 403


async def test_park_resume_and_a_site_restriction_say_why_a_mower_does_not_mow(
    http: aiohttp.ClientSession, fleet: FleetService, authorizer: Authorizer, pool: asyncpg.Pool
) -> None:
    api = await owner(http, fleet, authorizer)
    mower = await registered(api)
    # The site through the API, so that its account and the mower's link are granted.
    body = {"name": "Park", "timezone": "Europe/Berlin", "location": {"lat": 52.5, "lon": 13.4}}
    status, made = await api.call("POST", "/v1/sites", body)
    assert status == 201, made
    site = made["site_id"]
    status, _ = await api.call("PATCH", f"/v1/mowers/{mower}", {"site_id": site})
    assert status == 200
    task = {"start": "08:30", "duration_minutes": 90, "days": WEEKDAYS}
    status, body = await api.call(
        "PUT", f"/v1/mowers/{mower}/schedule", {"enabled": True, "tasks": [task]}
    )
    assert status == 200, body
    override = f"/v1/mowers/{mower}/schedule/override"
    status, body = await api.call("POST", override, {"override": "park_until_further_notice"})
    assert (status, body["mowers"], len(body["command_ids"])) == (200, 1, 1)  # docked now
    _, view = await api.call("GET", f"/v1/mowers/{mower}/schedule")
    assert view["restricted"] == {"reason": "park_until_further_notice", "until": None}
    assert view["next_start"] is None
    status, body = await api.call("POST", override, {"override": "resume_schedule"})
    assert status == 200
    _, view = await api.call("GET", f"/v1/mowers/{mower}/schedule")
    assert view["restricted"] is None
    until = (datetime.now(UTC) + timedelta(hours=2)).isoformat()
    status, made = await api.call(
        "POST", f"/v1/sites/{site}/restrictions", {"reason": "rain", "until": until}
    )
    assert status == 201, made
    _, view = await api.call("GET", f"/v1/mowers/{mower}/schedule")
    assert view["restricted"]["reason"] == "rain"
    status, listed = await api.call("GET", f"/v1/sites/{site}/restrictions")
    assert [r["restriction_id"] for r in listed["restrictions"]] == [made["restriction_id"]]
    past = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    status, body = await api.call(
        "POST", f"/v1/sites/{site}/restrictions", {"reason": "frost", "until": past}
    )
    assert (status, body["field"]) == (422, "until")
    restriction = made["restriction_id"]
    assert (await api.call("DELETE", f"/v1/sites/{site}/restrictions/{restriction}"))[0] == 204
    _, view = await api.call("GET", f"/v1/mowers/{mower}/schedule")
    assert view["restricted"] is None
    other = await owner(http, fleet, authorizer)
    status, _ = await other.call("GET", f"/v1/sites/{site}/restrictions")
    assert status == 404
