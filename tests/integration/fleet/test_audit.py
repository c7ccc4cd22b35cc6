"""The audit trail on real PostgreSQL: who may read it, paging, export, append-only."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta, timezone

import aiohttp
import asyncpg
import pytest

from mowdeck.authz import Authorizer, grant_tuples
from mowdeck.fleet import FleetService
from mowdeck.fleet.errors import ValueRefusedError
from mowdeck.fleet.ports import AuditQuery, PruneCutoffs
from mowdeck.fleet.postgres import PostgresPruning
from mowdeck.fleet.postgres_commands import PostgresAuditTrail
from mowdeck.kit.bus import Bus
from tests.integration.fleet.conftest import AUTH, Api, settings
from tests.integration.fleet.conftest import KINDS as CONNECTION_KINDS
from tests.integration.fleet.test_commands import registered
from tests.integration.fleet.test_rest import owner

KINDS = ["start_mow", "emergency_stop", "pause_mow", "emergency_stop", "return_to_dock"]


async def issued(api: Api, mower_id: str, kinds: list[str]) -> list[str]:
    """Issue one command per kind, in order; their ids."""
    ids = []
    for kind in kinds:
        command: dict[str, object] = {"kind": kind}
        if kind == "emergency_stop":
            command["reason"] = "child on lawn"
        status, body = await api.call(
            "POST", f"/v1/mowers/{mower_id}/commands", {"command": command}
        )
        assert status == 202, body
        ids.append(body["command_id"])
    return ids


async def test_admins_page_their_accounts_trail_newest_first_and_others_get_403(
    fleet: FleetService, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    admin = await owner(http, fleet, authorizer)
    mower_id = await registered(admin)
    ids = await issued(admin, mower_id, KINDS)
    stranger = await owner(http, fleet, authorizer)  # admin of another account
    await issued(stranger, await registered(stranger), ["pause_mow"])

    status, page = await admin.call("GET", "/v1/audit?limit=2")
    assert status == 200
    seen = [c["command_id"] for c in page["commands"]]
    while page["next_cursor"] is not None:
        status, page = await admin.call("GET", f"/v1/audit?limit=2&cursor={page['next_cursor']}")
        assert status == 200
        seen += [c["command_id"] for c in page["commands"]]
    assert seen == ids[::-1]  # only this account's, newest first

    status, page = await admin.call("GET", f"/v1/audit?mower={mower_id}&kind=emergency_stop")
    stops = page["commands"]
    assert [c["command_id"] for c in stops] == [ids[3], ids[1]]
    assert stops[0]["command"] == {"kind": "emergency_stop", "reason": "child on lawn"}
    assert (stops[0]["issued_by"], stops[0]["mower_id"], stops[0]["account_id"]) == (
        f"user:{admin.user}",
        mower_id,
        str(admin.account),
    )
    since = (datetime.now(UTC) - timedelta(minutes=5)).isoformat().replace("+00:00", "Z")
    until = (datetime.now(UTC) + timedelta(days=300)).isoformat().replace("+00:00", "Z")
    status, page = await admin.call("GET", f"/v1/audit?from={since}&to={until}")
    assert (status, len(page["commands"])) == (200, len(KINDS))
    status, page = await admin.call("GET", "/v1/audit?to=2000-01-01T00:00:00Z")
    assert (status, page["commands"], page["next_cursor"]) == (200, [], None)

    for role in ("operator", "viewer"):
        user = Api(http, fleet.url, f"{role}-{uuid.uuid4().hex[:6]}", admin.account)
        await authorizer.write(grant_tuples(admin.account, user.user, role))
        assert (await user.call("GET", "/v1/audit"))[0] == 403
        assert (await user.call("GET", "/v1/audit/export"))[0] == 403
    assert (await Api(http, fleet.url, "nobody", admin.account).call("GET", "/v1/audit"))[0] == 403


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("mower=nope", "mower"),
        ("kind=fly_away", "kind"),
        ("from=yesterday", "from"),
        ("from=2026-05-01T00:00:00", "from"),  # no offset
        ("limit=0", "limit"),
        ("limit=", "limit"),
        ("from=", "from"),
        ("limit=1001", "limit"),
        ("limit=ten", "limit"),
        ("cursor=not-a-cursor", "cursor"),
    ],
    ids=str,
)
async def test_a_bad_query_parameter_is_a_400_naming_it(
    fleet: FleetService, authorizer: Authorizer, http: aiohttp.ClientSession, query: str, field: str
) -> None:
    admin = await owner(http, fleet, authorizer)
    for path in ("/v1/audit", "/v1/audit/export"):
        async with http.get(f"{fleet.url}{path}?{query}", headers=admin.headers) as r:
            assert (r.status, r.content_type) == (400, "application/problem+json")
            assert (await r.json())["field"] == field


@pytest.mark.parametrize(
    ("query", "field"),
    [
        # Before the first representable instant once in UTC: asyncpg cannot send it,
        # and that data error was answered as an outage (503 "registry unavailable").
        ("from=0001-01-01T00:00:00%2B01:00", "from"),
        ("to=9999-12-31T23:59:59.999999Z", "to"),  # `infinity` to PostgreSQL
        # Two good times, but no window between them.
        ("from=2026-05-02T00:00:00Z&to=2026-05-01T00:00:00Z", "to"),
    ],
    ids=str,
)
async def test_a_time_out_of_range_is_a_422_naming_it_never_an_outage(
    fleet: FleetService, authorizer: Authorizer, http: aiohttp.ClientSession, query: str, field: str
) -> None:
    admin = await owner(http, fleet, authorizer)
    for path in ("/v1/audit", "/v1/audit/export"):
        async with http.get(f"{fleet.url}{path}?{query}", headers=admin.headers) as r:
            assert (r.status, r.content_type) == (422, "application/problem+json"), path
            assert (await r.json())["field"] == field


async def test_a_value_the_database_refuses_is_refused_not_an_outage(pool: asyncpg.Pool) -> None:
    # Past the range checks, the adapter's own translation: a value asyncpg cannot send.
    trail = PostgresAuditTrail(pool)
    query = AuditQuery(
        account_id=uuid.uuid4(),
        mower_id=None,
        since=datetime(1, 1, 1, 0, 30, tzinfo=timezone(timedelta(hours=1))),
        until=None,
        kind=None,
        limit=10,
        before=None,
    )
    with pytest.raises(ValueRefusedError):
        await trail.page(query)


async def test_the_export_streams_every_match_as_json_lines(
    fleet: FleetService, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    admin = await owner(http, fleet, authorizer)
    mower_id = await registered(admin)
    ids = await issued(admin, mower_id, KINDS)
    async with http.get(f"{fleet.url}/v1/audit/export", headers=admin.headers) as r:
        assert (r.status, r.content_type) == (200, "application/x-ndjson")
        assert r.headers.get("Transfer-Encoding") == "chunked"
        lines = (await r.read()).decode().splitlines()
    entries = [json.loads(line) for line in lines]
    assert [e["command_id"] for e in entries] == ids[::-1]
    assert {e["kind"] for e in entries} == set(KINDS)
    async with http.get(
        f"{fleet.url}/v1/audit/export?kind=emergency_stop", headers=admin.headers
    ) as r:
        stops = [json.loads(line) for line in (await r.read()).decode().splitlines()]
    assert [e["command_id"] for e in stops] == [ids[3], ids[1]]


async def test_the_trail_is_append_only_but_for_the_retention_round(
    pool: asyncpg.Pool, fleet: FleetService, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    admin = await owner(http, fleet, authorizer)
    (command_id,) = await issued(admin, await registered(admin), ["pause_mow"])
    for statement in (
        "UPDATE fleet_audit_commands SET kind = 'start_mow' WHERE command_id = $1",
        "DELETE FROM fleet_audit_commands WHERE command_id = $1",
        "DELETE FROM fleet_audit_statuses WHERE command_id = $1",
    ):
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
            await pool.execute(statement, uuid.UUID(command_id))
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
        await pool.execute("TRUNCATE fleet_audit_statuses")
    now = datetime.now(UTC)
    later = now + timedelta(minutes=1)  # everything so far is "older" than this
    deleted = await PostgresPruning(pool).prune(PruneCutoffs(now, now, later), 1000)
    assert deleted is not None
    assert deleted["fleet_audit_commands"] >= 1
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM fleet_audit_commands WHERE command_id = $1", uuid.UUID(command_id)
        )
        == 0
    )
    # The setting the round used stayed on its own connection.
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await pool.execute("DELETE FROM fleet_audit_commands")


async def test_a_query_past_the_statement_timeout_is_cancelled_and_answered_503(
    bus: Bus, pool: asyncpg.Pool, fleet_db: str, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    # Fleet with a pool of its own, made from its settings.
    service = FleetService(
        settings(database_url=fleet_db, database_statement_timeout_ms=300),
        auth_settings=AUTH,
        bus=bus,
        authorizer=authorizer,
        connection_kinds=CONNECTION_KINDS,
    )
    await service.start()
    try:
        admin = await owner(http, service, authorizer)
        # A statement that cannot finish: the table is locked until the answer has come.
        async with pool.acquire() as locker, locker.transaction():
            await locker.execute("LOCK TABLE fleet_audit_commands IN ACCESS EXCLUSIVE MODE")
            status, body = await admin.call("GET", "/v1/audit", timeout=aiohttp.ClientTimeout(30))
        assert (status, body["type"].rsplit("/", 1)[-1]) == (503, "unavailable")
    finally:
        await service.stop()
