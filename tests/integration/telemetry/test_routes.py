"""The query API over HTTP: the three scopes, both 404 kinds, limits and shapes."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import aiohttp
import pytest

from mowdeck.authn import TokenIssuer
from mowdeck.authz import (
    LocalAuthorizer,
    Tuple,
    account_object,
    grant_tuples,
    mower_object,
    site_object,
    user_ref,
)
from mowdeck.telemetry.model import TimelineRow
from mowdeck.telemetry.service import TelemetryService
from tests.integration.telemetry.conftest import ServiceFactory
from tests.unit.telemetry.samples import ACCOUNT, MOWER, OTHER_ACCOUNT, T0, at, state
from tests.unit.telemetry.store_contract import write

GROUPED = MOWER
UNGROUPED = uuid.UUID(int=2)
SILENT = uuid.UUID(int=3)  # visible, never reported
MISFILED = uuid.UUID(int=4)  # tuples say ACCOUNT, the rows say another account
FOREIGN = uuid.UUID(int=5)  # another account's mower
SITE = uuid.UUID(int=6)  # a site of ACCOUNT holding UNGROUPED


@pytest.fixture
async def service(make_service: ServiceFactory, authorizer: LocalAuthorizer) -> TelemetryService:
    svc = await make_service(telemetry_query_max_rows=50, clock=lambda: at(20))
    tuples = [
        *grant_tuples(ACCOUNT, "alice", "viewer"),
        *grant_tuples(ACCOUNT, "bob", "viewer", group_id="g1"),
        *grant_tuples(OTHER_ACCOUNT, "carol", "admin"),
        *grant_tuples(ACCOUNT, "sam", "viewer", site_id=SITE),
        Tuple(account_object(ACCOUNT), "account", site_object(SITE)),
        Tuple(site_object(SITE), "site", mower_object(UNGROUPED)),
        # A foreign mower placed at the site stays invisible to its viewers.
        Tuple(site_object(SITE), "site", mower_object(FOREIGN)),
        Tuple(account_object(ACCOUNT), "account", mower_object(GROUPED)),
        Tuple("group:g1", "group", mower_object(GROUPED)),
        Tuple(account_object(ACCOUNT), "account", mower_object(UNGROUPED)),
        Tuple(account_object(ACCOUNT), "account", mower_object(SILENT)),
        Tuple(account_object(ACCOUNT), "account", mower_object(MISFILED)),
        Tuple(account_object(OTHER_ACCOUNT), "account", mower_object(FOREIGN)),
        # An object list_objects returns although it names no mower id.
        Tuple(account_object(ACCOUNT), "account", mower_object("not-a-uuid")),
        Tuple("group:g1", "group", mower_object("not-a-uuid")),
    ]
    await authorizer.write(tuples)
    states = [
        state(0, mower_id=GROUPED),
        state(10, mower_id=GROUPED, battery=70),
        state(0, mower_id=UNGROUPED),
        state(0, mower_id=MISFILED, account_id=OTHER_ACCOUNT),
        state(0, mower_id=FOREIGN, account_id=OTHER_ACCOUNT),
    ]
    await write(svc.parts.store, latest=states[1:], history=states, positions=states)
    for i, status in enumerate(("accepted", "executed")):
        await svc.parts.store.add_timeline(
            TimelineRow(
                command_id=uuid.UUID(int=1),
                status=status,
                mower_id=GROUPED,
                account_id=ACCOUNT,
                at=at(i),
            )
        )
    await svc.parts.store.add_timeline(
        TimelineRow(
            command_id=uuid.UUID(int=2),
            status="accepted",
            mower_id=MISFILED,
            account_id=OTHER_ACCOUNT,
            at=at(0),
        )
    )
    return svc


async def _get(
    service: TelemetryService,
    issuer: TokenIssuer,
    user: str | None,
    path: str,
    account: uuid.UUID = ACCOUNT,
) -> tuple[int, Any]:
    headers = {} if user is None else {"Authorization": f"Bearer {issuer.mint(user, account)}"}
    async with aiohttp.ClientSession() as http, http.get(service.url + path, headers=headers) as r:
        return r.status, await r.json(content_type=None)


def _kind(body: Any) -> str:
    return str(body["type"]).rsplit("/", 1)[-1]


async def test_state_for_a_visible_mower(service: TelemetryService, issuer: TokenIssuer) -> None:
    status, body = await _get(service, issuer, "alice", f"/v1/mowers/{GROUPED}/state")
    assert status == 200
    assert (body["battery"], body["observed_at"], body["stale"]) == (
        70,
        "2026-05-01T12:00:10Z",
        False,
    )
    assert body["position"] == {"lat": 52.5, "lon": 13.4, "heading_deg": None}


async def test_state_is_stale_after_the_configured_age(
    make_service: ServiceFactory, service: TelemetryService, issuer: TokenIssuer
) -> None:
    late = await make_service(telemetry_stale_after_seconds=5, clock=lambda: at(16))
    status, body = await _get(late, issuer, "alice", f"/v1/mowers/{GROUPED}/state")
    assert (status, body["stale"]) == (200, True)


@pytest.mark.parametrize(
    ("user", "account", "mower", "kind"),
    [
        ("bob", ACCOUNT, UNGROUPED, "not-found"),  # outside bob's group
        ("carol", OTHER_ACCOUNT, GROUPED, "not-found"),  # another account's caller
        ("alice", ACCOUNT, FOREIGN, "not-found"),  # another account's mower
        ("alice", ACCOUNT, SILENT, "no-telemetry-yet"),
        ("alice", ACCOUNT, MISFILED, "no-telemetry-yet"),  # rows of another account stay hidden
    ],
    ids=["foreign-group", "foreign-caller", "foreign-mower", "silent", "account-filter"],
)
async def test_the_two_kinds_of_404(  # noqa: PLR0917 - one parameter per column
    service: TelemetryService,
    issuer: TokenIssuer,
    user: str,
    account: uuid.UUID,
    mower: uuid.UUID,
    kind: str,
) -> None:
    for route in ("state", "history", "history?step=1h", "track", "commands"):
        status, body = await _get(service, issuer, user, f"/v1/mowers/{mower}/{route}", account)
        if route != "state" and kind == "no-telemetry-yet":
            # Empty lists for a visible mower: rows stored under another account never show.
            assert (status, body["items"], body["truncated"]) == (200, [], False), route
            continue
        assert status == 404
        assert _kind(body) == kind


async def test_the_misfiled_rows_exist_under_the_other_account(service: TelemetryService) -> None:
    # What the "account-filter" case above must not show is really there.
    store = service.parts.store
    start, end = at(-3600), at(3600)
    assert await store.history(OTHER_ACCOUNT, MISFILED, start, end, 10)
    assert await store.history_bins(OTHER_ACCOUNT, MISFILED, start, end, timedelta(hours=1))
    assert await store.track(OTHER_ACCOUNT, MISFILED, start, end, 10)
    assert await store.timeline(OTHER_ACCOUNT, MISFILED, start, end, 10)


async def test_unauthenticated_is_401(service: TelemetryService, issuer: TokenIssuer) -> None:
    status, body = await _get(service, issuer, None, "/v1/states")
    assert (status, _kind(body)) == (401, "unauthenticated")


@pytest.mark.parametrize(
    ("user", "account", "expected"),
    [
        ("alice", ACCOUNT, [GROUPED, UNGROUPED]),
        ("bob", ACCOUNT, [GROUPED]),
        ("sam", ACCOUNT, [UNGROUPED]),
        ("carol", OTHER_ACCOUNT, [MISFILED, FOREIGN]),
        ("carol", ACCOUNT, []),
    ],
    ids=[
        "account-viewer",
        "group-viewer",
        "site-viewer",
        "other-account",
        "token-account-mismatch",
    ],
)
async def test_states_list_is_scoped(
    service: TelemetryService,
    issuer: TokenIssuer,
    user: str,
    account: uuid.UUID,
    expected: list[uuid.UUID],
) -> None:
    status, body = await _get(service, issuer, user, "/v1/states", account)
    assert status == 200
    assert [item["mower_id"] for item in body["items"]] == [str(m) for m in sorted(expected)]


async def test_history_track_and_commands(service: TelemetryService, issuer: TokenIssuer) -> None:
    window = "from=2026-05-01T11:00:00Z&to=2026-05-01T13:00:00Z"
    status, body = await _get(service, issuer, "bob", f"/v1/mowers/{GROUPED}/history?{window}")
    assert status == 200
    assert [r["battery"] for r in body["items"]] == [80, 70]
    assert body["truncated"] is False
    status, body = await _get(
        service, issuer, "bob", f"/v1/mowers/{GROUPED}/history?{window}&step=1h"
    )
    assert status == 200
    assert body["step"] == "1h"
    [point] = body["items"]
    assert (point["bin"], point["battery"], point["samples"]) == ("2026-05-01T12:00:00Z", 75, 2)
    status, body = await _get(service, issuer, "bob", f"/v1/mowers/{GROUPED}/track?{window}")
    assert [p["observed_at"] for p in body["items"]] == [
        "2026-05-01T12:00:00Z",
        "2026-05-01T12:00:10Z",
    ]
    status, body = await _get(service, issuer, "bob", f"/v1/mowers/{GROUPED}/commands?{window}")
    assert [c["status"] for c in body["items"]] == ["accepted", "executed"]


async def test_limits(service: TelemetryService, issuer: TokenIssuer) -> None:
    base = f"/v1/mowers/{GROUPED}/history"
    start = T0 - timedelta(days=31)

    def span(days: float, step: str | None = None) -> str:
        end = start + timedelta(days=days)
        query = f"?from={start.isoformat().replace('+00:00', 'Z')}"
        query += f"&to={end.isoformat().replace('+00:00', 'Z')}"
        return base + query + (f"&step={step}" if step else "")

    assert (await _get(service, issuer, "alice", span(31, "1d")))[0] == 200
    status, body = await _get(service, issuer, "alice", span(31.5, "1d"))
    assert (status, _kind(body)) == (422, "query-limit")
    # 50 rows at most (this service's limit): 51 hourly bins are refused, 50 are fine.
    assert (await _get(service, issuer, "alice", span(50 / 24, "1h")))[0] == 200
    status, body = await _get(service, issuer, "alice", span(51 / 24, "1h"))
    assert (status, _kind(body)) == (422, "query-limit")
    for bad in ("step=0s", "step=1y", "from=yesterday", "from=2026-05-01T00:00:00"):
        status, _ = await _get(service, issuer, "alice", f"{base}?{bad}")
        assert status in (400, 422), bad
    # Times outside what a query can mean: a 422 naming the parameter, before any query.
    for bad, field in (
        ("from=0001-01-01T00:30:00%2B01:00&to=0001-01-02T00:00:00Z", "to"),
        ("to=0001-01-01T00:00:00Z", "to"),
        ("to=9999-12-31T23:00:00-05:00", "to"),
        ("from=1999-12-31T23:59:59Z&to=2000-01-01T01:00:00Z", "from"),
        ("from=2026-05-01T00:00:00Z&to=2027-06-01T00:00:00Z", "to"),  # a year past now
    ):
        status, body = await _get(service, issuer, "alice", f"{base}?{bad}")
        assert (status, _kind(body), body.get("field")) == (422, "query-limit", field), bad


async def test_a_range_at_the_end_of_time_is_refused_before_any_query(
    service: TelemetryService, issuer: TokenIssuer
) -> None:
    # datetime.max reaches PostgreSQL as `infinity`: bins generated without end, a query
    # that ran until cancelled by hand, one viewer's request stalling every service.
    path = (
        f"/v1/mowers/{GROUPED}/history?step=1m"
        "&from=9999-12-31T22:00:00Z&to=9999-12-31T23:59:59.999999Z"
    )
    status, body = await _get(service, issuer, "alice", path)
    assert (status, _kind(body), body["field"]) == (422, "query-limit", "to")
    for route in ("track", "commands"):
        path = f"/v1/mowers/{GROUPED}/{route}?from=9999-12-31T22:00:00Z&to=9999-12-31T23:59:59Z"
        status, body = await _get(service, issuer, "alice", path)
        assert (status, body["field"]) == (422, "to"), route


async def test_raw_history_is_cut_at_the_row_limit(
    make_service: ServiceFactory, service: TelemetryService, issuer: TokenIssuer
) -> None:
    await write(service.parts.store, history=[state(100 + i, battery=i) for i in range(60)])
    path = f"/v1/mowers/{GROUPED}/history?from=2026-05-01T12:00:00Z&to=2026-05-01T13:00:00Z"
    status, body = await _get(service, issuer, "alice", path)
    assert status == 200
    assert (len(body["items"]), body["truncated"]) == (50, True)


async def test_states_list_skips_objects_that_name_no_mower_id(
    service: TelemetryService, issuer: TokenIssuer, authorizer: LocalAuthorizer
) -> None:
    objects = await authorizer.list_objects(user_ref("bob"), "can_view", "mower")
    assert mower_object("not-a-uuid") in objects  # what the fixture planted
    status, body = await _get(service, issuer, "bob", "/v1/states")
    assert status == 200
    assert [item["mower_id"] for item in body["items"]] == [str(GROUPED)]


@pytest.mark.parametrize(
    ("user", "account", "expected"),
    [
        ("alice", ACCOUNT, [GROUPED, UNGROUPED]),  # the mowers list_objects names
        ("carol", OTHER_ACCOUNT, [MISFILED, FOREIGN]),  # the whole account
    ],
    ids=["visible-set", "account"],
)
async def test_states_come_in_pages_that_say_whether_more_follow(
    service: TelemetryService,
    issuer: TokenIssuer,
    user: str,
    account: uuid.UUID,
    expected: list[uuid.UUID],
) -> None:
    seen: list[str] = []
    path = "/v1/states?limit=1&ignored=yes"
    while True:
        status, body = await _get(service, issuer, user, path, account)
        assert status == 200
        assert len(body["items"]) == 1
        seen += [item["mower_id"] for item in body["items"]]
        if not body["has_more"]:
            assert body["next_after"] is None
            break
        path = f"/v1/states?limit=1&after={body['next_after']}"
    assert seen == [str(m) for m in sorted(expected)]


@pytest.mark.parametrize(
    ("query", "field"),
    [("limit=0", "limit"), ("limit=1001", "limit"), ("limit=1e3", "limit"), ("after=zz", "after")],
)
async def test_a_bad_page_parameter_is_a_400_naming_it(
    service: TelemetryService, issuer: TokenIssuer, query: str, field: str
) -> None:
    status, body = await _get(service, issuer, "alice", f"/v1/states?{query}")
    assert (status, body["field"]) == (400, field)
