"""``GET /v1/mowers`` and ``GET /v1/audit`` in pages: ``limit``, ``after``, ``has_more``."""

from __future__ import annotations

import uuid

import aiohttp
import asyncpg

from mowdeck.authz import Authorizer
from mowdeck.fleet import FleetService
from mowdeck.fleet.postgres import PAGE_OF_ACCOUNT
from tests.integration.fleet.test_rest import owner


async def test_mowers_come_in_pages_by_name_that_cover_each_once(
    fleet: FleetService, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    api = await owner(http, fleet, authorizer)
    other = await owner(http, fleet, authorizer)
    names = ["b", "a", "c", "a", "e"]
    for name in names:
        status, _ = await api.call(
            "POST", "/v1/mowers", {"name": name, "connection": {"kind": "simulator"}}
        )
        assert status == 201
    await other.call("POST", "/v1/mowers", {"name": "a", "connection": {"kind": "simulator"}})
    seen, after, pages = [], None, 0
    while True:
        query = "?limit=2&unknown=1" + (f"&after={after}" if after else "")
        status, page = await api.call("GET", "/v1/mowers" + query)
        assert status == 200
        pages += 1
        assert len(page["mowers"]) <= 2
        seen += page["mowers"]
        assert page["has_more"] == (page["next_after"] is not None)
        if not page["has_more"]:
            break
        after = page["next_after"]
    assert pages == 3
    assert [m["name"] for m in seen] == sorted(names)
    assert len({m["mower_id"] for m in seen}) == len(names)
    status, whole = await api.call("GET", "/v1/mowers")
    assert (len(whole["mowers"]), whole["has_more"], whole["next_after"]) == (5, False, None)


async def test_a_bad_limit_or_cursor_is_a_400_naming_it(
    fleet: FleetService, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    api = await owner(http, fleet, authorizer)
    for query, field in [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=x", "limit"),
        ("after=not-a-cursor!", "after"),
        ("after=WzFd", "after"),  # a JSON list, but not a position
    ]:
        status, problem = await api.call("GET", f"/v1/mowers?{query}")
        assert (status, problem["field"]) == (400, field), query
    status, _ = await api.call("GET", f"/v1/mowers/{uuid.uuid4()}x")
    assert status == 404


async def test_the_audit_says_whether_more_follow_and_reads_after(
    fleet: FleetService,
    authorizer: Authorizer,
    http: aiohttp.ClientSession,
    pool: asyncpg.Pool,
) -> None:
    api = await owner(http, fleet, authorizer)
    _, mower = await api.call(
        "POST", "/v1/mowers", {"name": "M", "connection": {"kind": "simulator"}}
    )
    for _ in range(3):
        status, _ = await api.call(
            "POST", f"/v1/mowers/{mower['mower_id']}/commands", {"command": {"kind": "pause_mow"}}
        )
        assert status in (200, 202)
    status, first = await api.call("GET", "/v1/audit?limit=2")
    assert (status, len(first["commands"]), first["has_more"]) == (200, 2, True)
    assert first["next_after"] == first["next_cursor"]
    _, rest = await api.call("GET", f"/v1/audit?limit=2&after={first['next_after']}")
    assert (len(rest["commands"]), rest["has_more"], rest["next_after"]) == (1, False, None)
    _, same = await api.call("GET", f"/v1/audit?limit=2&cursor={first['next_after']}")
    assert same["commands"] == rest["commands"]
    _, exact = await api.call("GET", "/v1/audit?limit=3")
    assert (len(exact["commands"]), exact["has_more"]) == (3, False)
    status, problem = await api.call("GET", "/v1/audit?after=nope")
    assert (status, problem["field"]) == (400, "after")


async def test_a_page_is_read_through_an_index_never_by_offset(pool: asyncpg.Pool) -> None:
    assert "OFFSET" not in PAGE_OF_ACCOUNT.upper()
    params = [uuid.uuid4(), [uuid.uuid4()], "a", uuid.uuid4(), 101]
    async with pool.acquire() as conn, conn.transaction():
        # Rows of a test database are few: ask what the plan is where a scan would cost.
        await conn.execute("SET LOCAL enable_seqscan = off")
        plan = await conn.fetchval(f"EXPLAIN (FORMAT JSON) {PAGE_OF_ACCOUNT}", *params)
    assert "Index" in plan and "Seq Scan" not in plan, plan
