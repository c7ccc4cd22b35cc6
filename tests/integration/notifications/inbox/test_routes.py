"""The preferences and inbox API over HTTP, on PostgreSQL, with real tokens and tuples."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import asyncpg
import msgspec
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

from mowdeck.authn import TokenIssuer, TokenVerifier
from mowdeck.authz import (
    AuthzUnavailableError,
    InMemoryTupleStore,
    LocalAuthorizer,
    Tuple,
    account_object,
    grant_tuples,
    mower_object,
    user_ref,
)
from mowdeck.kit.http import PROBLEM_CONTENT_TYPE, Readiness
from mowdeck.notifications.inbox.model import InboxEntry
from mowdeck.notifications.inbox.routes import ApiDeps, create_app
from mowdeck.notifications.infra import Stores
from mowdeck.notifications.rules.events import RuleEvent
from mowdeck.notifications.rules.kinds import DEFAULT_ENABLED
from mowdeck.notifications.settings import NotificationsSettings
from tests.support.cors import ALLOWED, check_preflights
from tests.unit.notifications.samples import ACCOUNT, AUTH, MOWER, OTHER_ACCOUNT, OTHER_MOWER, at
from tests.unit.notifications.stores import LEASE, event, queue

Client = TestClient[web.Request, web.Application]

FOREIGN = uuid.UUID("00000000-0000-4000-8000-00000000000f")  # OTHER_ACCOUNT's mower
UNKNOWN = uuid.UUID("00000000-0000-4000-8000-0000000000ff")  # in no directory
DIRECTORY = {MOWER: ACCOUNT, OTHER_MOWER: ACCOUNT, FOREIGN: OTHER_ACCOUNT}
PREFS = "/v1/notifications/preferences"
INBOX = "/v1/notifications/inbox"
ROUTES = [("GET", PREFS), ("PUT", PREFS), ("GET", INBOX), ("POST", f"{INBOX}/{uuid.uuid4()}/read")]


@pytest.fixture
async def authorizer() -> LocalAuthorizer:
    authz = LocalAuthorizer(InMemoryTupleStore())
    await authz.write(
        [
            *grant_tuples(ACCOUNT, "alice", "viewer"),
            # bob views MOWER through group g1, not OTHER_MOWER.
            *grant_tuples(ACCOUNT, "bob", "viewer", group_id="g1"),
            *grant_tuples(OTHER_ACCOUNT, "carol", "admin"),
            # dave belongs to the account and may view nothing.
            Tuple(user_ref("dave"), "member", account_object(ACCOUNT)),
            Tuple(account_object(ACCOUNT), "account", mower_object(MOWER)),
            Tuple(account_object(ACCOUNT), "account", mower_object(OTHER_MOWER)),
            Tuple("group:g1", "group", mower_object(MOWER)),
            Tuple(account_object(OTHER_ACCOUNT), "account", mower_object(FOREIGN)),
        ]
    )
    return authz


@pytest.fixture
async def client(stores: Stores, authorizer: LocalAuthorizer) -> AsyncIterator[Client]:
    deps = ApiDeps(
        inbox=stores.inbox,
        preferences=stores.preferences,
        authorizer=authorizer,
        settings=NotificationsSettings(),
        clock=lambda: at(0),
        mower_account=DIRECTORY.get,
    )
    app = create_app(deps, TokenVerifier(AUTH), Readiness(), CollectorRegistry())
    async with TestClient(TestServer(app)) as c:
        yield c


def _auth(user: str | None, account: uuid.UUID = ACCOUNT) -> dict[str, str]:
    if user is None:
        return {}
    return {"Authorization": f"Bearer {TokenIssuer(AUTH).mint(user, account)}"}


async def call(
    client: Client,
    method: str,
    path: str,
    user: str | None = "alice",
    *,
    body: Any = None,
    account: uuid.UUID = ACCOUNT,
    raw: str | None = None,
    content_type: str = "application/json",
) -> tuple[int, Any]:
    """Status and decoded body; every error must be a problem document."""
    headers = _auth(user, account)
    data = raw if body is None else json.dumps(body)
    if data is not None:
        headers["Content-Type"] = content_type
    async with client.request(method, path, headers=headers, data=data) as r:
        if r.status >= 400:
            assert r.content_type == PROBLEM_CONTENT_TYPE, (r.status, await r.text())
        if r.status == 204:
            return r.status, None
        return r.status, await r.json(content_type=None)


def _kind(body: Any) -> str:
    return str(body["type"]).rsplit("/", 1)[-1]


def _fields(body: Any) -> list[str]:
    return [e["field"] for e in body["errors"]]


DEFAULTS: dict[str, Any] = {
    "locale": "en",
    "timezone": "UTC",
    "scope": "none",
    "mowers": [],
    "kinds": dict(DEFAULT_ENABLED),
    "quiet_hours": None,
}


# -- preferences ---------------------------------------------------------------------------


async def test_a_new_user_gets_the_defaults(client: Client) -> None:
    assert await call(client, "GET", PREFS) == (200, DEFAULTS)


async def test_put_answers_and_stores_the_whole_document(client: Client) -> None:
    doc = {
        "locale": "de",
        "timezone": "Europe/Berlin",
        "scope": "selected",
        "mowers": [str(MOWER)],
        "kinds": {**DEFAULT_ENABLED, "job_started": True, "battery_low": False},
        "quiet_hours": {"start": "22:00", "end": "07:00", "allow_critical": False},
    }
    assert await call(client, "PUT", PREFS, body=doc) == (200, doc)
    assert await call(client, "GET", PREFS) == (200, doc)
    # The whole document is replaced: what a second PUT leaves out is back at its default.
    assert await call(client, "PUT", PREFS, body={"scope": "all"}) == (
        200,
        {**DEFAULTS, "scope": "all"},
    )
    assert (await call(client, "GET", PREFS))[1]["quiet_hours"] is None


async def test_missing_kinds_take_their_defaults(client: Client) -> None:
    status, body = await call(client, "PUT", PREFS, body={"kinds": {"mower_online": False}})
    assert status == 200
    assert body["kinds"] == {**DEFAULT_ENABLED, "mower_online": False}
    assert body["kinds"]["job_started"] is False
    assert (await call(client, "GET", PREFS))[1]["kinds"] == body["kinds"]


async def test_preferences_belong_to_the_user(client: Client) -> None:
    await call(client, "PUT", PREFS, body={"scope": "all", "locale": "de"})
    assert await call(client, "GET", PREFS, "bob") == (200, DEFAULTS)


@pytest.mark.parametrize(
    ("user", "mower"),
    [
        ("alice", FOREIGN),
        ("bob", OTHER_MOWER),
        ("alice", UNKNOWN),
        ("carol", MOWER),
    ],
    ids=["another-accounts-mower", "not-viewable", "unknown-mower", "viewable-elsewhere"],
)
async def test_a_selected_mower_the_user_cannot_see_is_404(
    client: Client, user: str, mower: uuid.UUID
) -> None:
    account = OTHER_ACCOUNT if user == "carol" else ACCOUNT
    doc = {"scope": "selected", "mowers": [str(mower)]}
    if user == "carol":  # carol admins FOREIGN, which lets her in; MOWER is not hers
        doc["mowers"] = [str(FOREIGN), str(mower)]
    status, body = await call(client, "PUT", PREFS, user, body=doc, account=account)
    position = len(doc["mowers"]) - 1
    assert (status, _kind(body), body["field"]) == (404, "not-found", f"mowers[{position}]")
    assert [e["mower_id"] for e in body["errors"]] == [str(mower)]
    assert (await call(client, "GET", PREFS, user, account=account))[1]["scope"] == "none"


async def test_a_group_viewer_may_select_the_groups_mower(client: Client) -> None:
    mowers = [str(MOWER), str(MOWER)]
    status, body = await call(client, "PUT", PREFS, "bob", body={"mowers": mowers})
    assert (status, body["mowers"]) == (200, [str(MOWER)])
    # A repeat before the hidden mower: the 404 names its position in the body as sent.
    mowers.append(str(OTHER_MOWER).upper())
    status, body = await call(client, "PUT", PREFS, "bob", body={"mowers": mowers})
    assert (status, body["field"]) == (404, "mowers[2]")


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"timezone": "Mars/Olympus_Mons"}, "timezone"),
        ({"locale": "fr"}, "locale"),
        ({"quiet_hours": {"start": "25:00", "end": "07:00"}}, "quiet_hours.start"),
        ({"quiet_hours": {"start": "22:00", "end": "22:00"}}, "quiet_hours.end"),
        ({"kinds": {"jobs_started": True}}, "kinds.jobs_started"),
        ({"quiet_hour": None}, "quiet_hour"),
        ({"scope": "some"}, "scope"),
        ({"mowers": [str(MOWER), "not-a-uuid"]}, "mowers[1]"),
    ],
    ids=["timezone", "locale", "quiet-start", "quiet-empty", "kind", "unknown", "scope", "id"],
)
async def test_an_invalid_document_is_422_naming_the_field(
    client: Client, doc: dict[str, Any], field: str
) -> None:
    status, body = await call(client, "PUT", PREFS, body=doc)
    assert (status, _kind(body)) == (422, "invalid-preferences")
    assert field in _fields(body)
    assert body["field"] == _fields(body)[0]


@pytest.mark.parametrize("raw", ["{not json", "[1, 2]", "null"], ids=["syntax", "array", "null"])
async def test_a_body_that_is_no_document_is_400(client: Client, raw: str) -> None:
    status, body = await call(client, "PUT", PREFS, raw=raw)
    assert (status, _kind(body), _fields(body)) == (400, "bad-request", [""])


async def test_a_body_that_is_not_json_is_refused(client: Client) -> None:
    status, _ = await call(client, "PUT", PREFS, raw="scope=all", content_type="text/plain")
    assert status == 415
    status, body = await call(client, "PUT", PREFS, raw="")
    assert (status, _kind(body)) == (400, "empty-body")


# -- access ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
async def test_without_a_token_every_route_is_401(client: Client, method: str, path: str) -> None:
    status, body = await call(client, method, path, None, body={})
    assert (status, _kind(body)) == (401, "unauthenticated")


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
@pytest.mark.parametrize(
    ("user", "account"),
    [("dave", ACCOUNT), ("carol", ACCOUNT), ("nobody", ACCOUNT)],
    ids=["member-without-role", "other-accounts-admin", "stranger"],
)
async def test_a_user_who_can_view_nothing_is_403(
    client: Client, method: str, path: str, user: str, account: uuid.UUID
) -> None:
    status, body = await call(client, method, path, user, body={"scope": "all"}, account=account)
    assert (status, _kind(body)) == (403, "forbidden")


# -- inbox --------------------------------------------------------------------------------------


async def fill(stores: Stores, *delivered: tuple[RuleEvent, list[str]]) -> None:
    """Store each event in the inbox of its users, as the fan-out does."""
    await queue(stores, *(ev for ev, _ in delivered))
    pending = await stores.pending.claim_pending(at(10_000), len(delivered) + 1, LEASE)
    users = {ev.dedupe_key: names for ev, names in delivered}
    for p in pending:
        entries = [InboxEntry(user_id=u) for u in users[p.event.dedupe_key]]
        await stores.pending.complete_pending(p.id, p.event, entries, 200)


def battery(n: int, *, mower_id: uuid.UUID = MOWER) -> RuleEvent:
    """A battery_low at second ``n`` with battery ``n`` percent."""
    params = {"mower": "Rosie", "battery": n}
    return event(f"battery:{n}", n, mower_id=mower_id, params=params)


async def test_the_inbox_pages_newest_first(client: Client, stores: Stores) -> None:
    await fill(stores, *[(battery(n), ["alice"]) for n in range(7)], (battery(99), ["bob"]))
    seen: list[str] = []
    pages = 0
    path = f"{INBOX}?limit=3"
    while True:
        status, body = await call(client, "GET", path)
        assert status == 200
        pages += 1
        seen += [item["body"] for item in body["items"]]
        assert body["has_more"] == (body["next_after"] is not None)
        assert body["next"] == body["next_after"]  # its first name
        if not body["has_more"]:
            break
        # ``before``, the cursor's first name, reads the same pages.
        name = "after" if pages % 2 else "before"
        path = f"{INBOX}?limit=3&{name}={body['next_after']}&unknown=1"
    assert pages == 3
    assert seen == [f"Battery at {n}%." for n in range(6, -1, -1)]


async def test_an_inbox_item_has_the_documented_shape(client: Client, stores: Stores) -> None:
    await fill(stores, (battery(18), ["alice"]))
    status, body = await call(client, "GET", INBOX)
    assert status == 200
    [item] = body["items"]
    assert set(item) == {
        "id", "kind", "mower_id", "severity", "title", "body", "occurred_at", "read"
    }  # fmt: skip
    assert (item["kind"], item["severity"], item["mower_id"]) == (
        "battery_low",
        "warning",
        str(MOWER),
    )
    assert (item["occurred_at"], item["read"]) == ("2026-05-01T12:00:18Z", False)
    assert (body["next"], body["unread"]) == (None, 1)


async def test_the_inbox_limit_defaults_to_50(client: Client, stores: Stores) -> None:
    await fill(stores, *[(battery(n), ["alice"]) for n in range(51)])
    status, body = await call(client, "GET", INBOX)
    assert (status, len(body["items"]), body["unread"]) == (200, 50, 51)
    assert body["next"] is not None
    status, body = await call(client, "GET", f"{INBOX}?limit=200")
    assert (status, len(body["items"]), body["next"]) == (200, 51, None)


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=0", "limit"),
        ("limit=201", "limit"),
        ("limit=-1", "limit"),
        ("limit=ten", "limit"),
        ("limit=", "limit"),
        ("before=not-a-cursor", "before"),
        ("before=", "before"),
        ("after=not-a-cursor", "after"),
        ("after=x&before=", "after"),
    ],
)
async def test_a_bad_query_is_400(client: Client, query: str, field: str) -> None:
    status, body = await call(client, "GET", f"{INBOX}?{query}")
    assert (status, _kind(body), body["field"]) == (400, "bad-query", field)


async def test_items_are_rendered_in_the_readers_locale_and_zone(
    client: Client, stores: Stores
) -> None:
    offline = event(
        "offline",
        kind="mower_offline",
        params={"mower": "Rosie", "since": "2026-05-01T12:00:00+00:00"},
    )
    offline = msgspec.structs.replace(offline, message_key="mower_offline.silence")
    await fill(stores, (battery(18), ["alice"]), (offline, ["alice"]))

    async def texts() -> list[tuple[str, str]]:
        _, body = await call(client, "GET", INBOX)
        return [(item["title"], item["body"]) for item in body["items"]]

    assert await texts() == [
        ("Rosie: battery low", "Battery at 18%."),
        ("Rosie is offline", "No word from the mower since 12:00."),
    ]
    await call(client, "PUT", PREFS, body={"locale": "de", "timezone": "Europe/Berlin"})
    assert await texts() == [
        ("Rosie: Akku schwach", "Akku bei 18 %."),
        ("Rosie ist offline", "Seit 14:00 Uhr keine Meldung vom Mäher."),
    ]


async def test_read_marks_one_item_read(client: Client, stores: Stores) -> None:
    await fill(stores, (battery(1), ["alice", "bob"]), (battery(2), ["alice"]))
    _, before = await call(client, "GET", INBOX)
    newest, older = (item["id"] for item in before["items"])
    assert await call(client, "POST", f"{INBOX}/{older}/read") == (204, None)
    assert await call(client, "POST", f"{INBOX}/{older}/read") == (204, None)  # idempotent
    _, after = await call(client, "GET", INBOX)
    assert [(i["id"], i["read"]) for i in after["items"]] == [(newest, False), (older, True)]
    assert after["unread"] == 1
    _, bobs = await call(client, "GET", INBOX, "bob")
    assert [i["read"] for i in bobs["items"]] == [False]  # bob's copy is his own


@pytest.mark.parametrize("target", ["alices", "unknown", "malformed"])
async def test_read_of_an_item_not_yours_is_404(
    client: Client, stores: Stores, target: str
) -> None:
    await fill(stores, (battery(1), ["alice"]))
    _, inbox = await call(client, "GET", INBOX)
    item_id = {
        "alices": inbox["items"][0]["id"],
        "unknown": str(uuid.uuid4()),
        "malformed": "nope",
    }[target]
    status, body = await call(client, "POST", f"{INBOX}/{item_id}/read", "bob")
    assert (status, _kind(body)) == (404, "not-found")
    _, inbox = await call(client, "GET", INBOX)
    assert inbox["items"][0]["read"] is False


# -- collaborators down ---------------------------------------------------------------------


async def test_a_store_that_fails_is_503(
    client: Client, pool: asyncpg.Pool, stores: Stores
) -> None:
    await pool.close()
    for method, path in ROUTES:
        status, body = await call(client, method, path, body={"scope": "all"})
        assert (status, _kind(body)) == (503, "unavailable"), (method, path)


class DownAuthorizer(LocalAuthorizer):
    async def check(self, user: str, relation: str, object: str) -> bool:
        raise AuthzUnavailableError("OpenFGA is down")


async def test_authorization_down_is_503(stores: Stores) -> None:
    deps = ApiDeps(
        inbox=stores.inbox,
        preferences=stores.preferences,
        authorizer=DownAuthorizer(InMemoryTupleStore()),
        settings=NotificationsSettings(),
        clock=lambda: at(0),
        mower_account=DIRECTORY.get,
    )
    app = create_app(deps, TokenVerifier(AUTH), Readiness(), CollectorRegistry())
    async with TestClient(TestServer(app)) as down:
        status, body = await call(down, "GET", PREFS)
    assert (status, _kind(body)) == (503, "unavailable")


async def test_a_preflight_from_the_configured_origin_only(
    stores: Stores,
) -> None:
    authorizer = LocalAuthorizer(InMemoryTupleStore())
    await authorizer.write(grant_tuples(ACCOUNT, "alice", "viewer"))
    deps = ApiDeps(
        inbox=stores.inbox,
        preferences=stores.preferences,
        authorizer=authorizer,
        settings=NotificationsSettings(http_cors_origins=[ALLOWED]),
        clock=lambda: at(0),
        mower_account=lambda _: None,
    )
    app = create_app(deps, TokenVerifier(AUTH), Readiness(), CollectorRegistry())
    token = TokenIssuer(AUTH).mint("alice", ACCOUNT)
    async with TestServer(app) as server, aiohttp.ClientSession() as http:
        await check_preflights(
            http,
            str(server.make_url("/v1/notifications/inbox")),
            "GET",
            headers={"Authorization": f"Bearer {token}"},
        )
