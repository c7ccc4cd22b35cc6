"""Alarms through the running service: raised by states on NATS, listed, acknowledged by
an operator (not a viewer), assigned, cleared when the condition ends, with access
scoped as for the mowers they concern."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from contracts.v1 import AlarmChanged, decode_event
from mowdeck.authn import TokenIssuer
from mowdeck.authz import LocalAuthorizer
from mowdeck.kit.bus import Bus
from mowdeck.notifications.alarms.model import AlarmQuery
from mowdeck.notifications.infra import Stores
from mowdeck.notifications.service import NotificationsService
from tests.support.eventually import eventually
from tests.unit.notifications.samples import ACCOUNT, MOWER, OTHER_MOWER, Clock, state

from .conftest import AUTH, ServiceFactory, counted, grant, inbox, publish_states, subscribe

OPERATOR, VIEWER, ADMIN = "olga", "vera", "ada"


def _headers(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TokenIssuer(AUTH).mint(user, ACCOUNT)}"}


async def _alarms(http: aiohttp.ClientSession, url: str, user: str, query: str = "") -> Any:
    async with http.get(f"{url}/v1/alarms{query}", headers=_headers(user)) as r:
        assert r.status == 200, await r.text()
        return await r.json()


@pytest.fixture
async def service(
    make_service: ServiceFactory, authorizer: LocalAuthorizer
) -> NotificationsService:
    await grant(authorizer, OPERATOR, "operator")
    await grant(authorizer, VIEWER, "viewer")
    await grant(authorizer, ADMIN, "admin")
    return await make_service()


async def test_an_error_raises_an_alarm_an_operator_acknowledges_and_its_end_clears(
    service: NotificationsService, bus: Bus
) -> None:
    changes: list[AlarmChanged] = []

    async def on_change(msg: Any) -> None:
        changes.append(decode_event(msg.data).payload)

    sub = await bus.nc.subscribe("event.notifications.alarm_changed", cb=on_change)
    await publish_states(
        bus,
        [
            state(0, activity="mowing"),
            state(10, activity="error", error_code="E42"),
            state(11, mower_id=OTHER_MOWER, battery=50),
        ],
    )
    async with aiohttp.ClientSession() as http:
        url = service.url
        listed = await eventually(
            lambda: _items(http, url, VIEWER), what="the alarm listed for a viewer"
        )
        [alarm] = listed
        assert (alarm["mower_id"], alarm["condition"], alarm["kind"]) == (
            str(MOWER),
            "error:E42",
            "mower_stuck",
        )
        assert (alarm["state"], alarm["severity"], alarm["code"], alarm["count"]) == (
            "active",
            "critical",
            "E42",
            1,
        )
        ack = f"{url}/v1/alarms/{alarm['id']}/acknowledge"
        async with http.post(ack, headers=_headers(VIEWER), json={}) as r:
            assert r.status == 403  # seeing is not operating
        async with http.post(ack, headers=_headers(OPERATOR), json={"comment": "on it"}) as r:
            assert r.status == 200, await r.text()
            acked = await r.json()
        assert (acked["state"], acked["acknowledged_by"], acked["comment"]) == (
            "acknowledged",
            OPERATOR,
            "on it",
        )
        assert (
            service.metrics_registry.get_sample_value(
                "mowdeck_notifications_alarm_acknowledge_seconds_count", {"kind": "mower_stuck"}
            )
            == 1.0
        )
        assign = f"{url}/v1/alarms/{alarm['id']}/assign"
        async with http.post(assign, headers=_headers(OPERATOR), json={"assignee": VIEWER}) as r:
            assert r.status == 200
            assert (await r.json())["assignee"] == VIEWER
        async with http.post(assign, headers=_headers(OPERATOR), json={"assignee": "nobody"}) as r:
            assert r.status == 422
            assert (await r.json())["field"] == "assignee"
        # The error ends: the alarm is cleared, and listed only when cleared ones are asked.
        await publish_states(bus, [state(30, activity="mowing")])
        cleared = await eventually(
            lambda: _items(http, url, VIEWER, "?state=cleared"), what="the alarm cleared"
        )
        assert [(a["id"], a["acknowledged_by"]) for a in cleared] == [(alarm["id"], OPERATOR)]
        assert await _alarms(http, url, VIEWER) == {
            "items": [],
            "next_after": None,
            "has_more": False,
        }
    # Every change went out once, in order, naming the alarm (cleared is the last).
    await eventually(lambda: len(changes) >= 4 and changes[-1].change == "cleared")
    await sub.unsubscribe()
    assert [c.change for c in changes] == ["raised", "acknowledged", "assigned", "cleared"]
    assert {str(c.alarm_id) for c in changes} == {alarm["id"]}
    assert (changes[1].acknowledged_by, changes[2].assignee, changes[3].state) == (
        OPERATOR,
        VIEWER,
        "cleared",
    )
    assert counted(service, "alarm_changes", change="raised", kind="mower_stuck") == 1
    assert counted(service, "alarm_changes", change="cleared", kind="mower_stuck") == 1
    # The audit trail holds each change with who made it, for the account's admins only.
    async with aiohttp.ClientSession() as http:
        trail = f"{service.url}/v1/alarms/audit"
        async with http.get(trail, headers=_headers(OPERATOR)) as r:
            assert r.status == 403
        async with http.get(trail, headers=_headers(ADMIN)) as r:
            assert r.status == 200, await r.text()
            lines = (await r.json())["items"]
        assert [(x["change"], x["by"], x["comment"], x["assignee"]) for x in lines] == [
            ("cleared", None, None, None),
            ("assigned", OPERATOR, None, VIEWER),
            ("acknowledged", OPERATOR, "on it", None),
            ("raised", None, None, None),
        ]
        async with http.get(f"{trail}?limit=3", headers=_headers(ADMIN)) as r:
            first = await r.json()
        async with http.get(
            f"{trail}?limit=3&after={first['next_after']}", headers=_headers(ADMIN)
        ) as r:
            assert [x["change"] for x in (await r.json())["items"]] == ["raised"]
        async with http.get(f"{trail}/export?change=acknowledged", headers=_headers(ADMIN)) as r:
            assert r.status == 200
            assert r.content_type == "application/x-ndjson"
            exported = [json.loads(line) for line in (await r.text()).splitlines()]
        assert [(x["change"], x["alarm_id"]) for x in exported] == [("acknowledged", alarm["id"])]
        async with http.get(f"{trail}?change=nonsense", headers=_headers(ADMIN)) as r:
            assert r.status == 400
            assert (await r.json())["field"] == "change"


async def test_a_mower_first_seen_in_error_has_its_alarm_open(
    service: NotificationsService, bus: Bus
) -> None:
    await publish_states(bus, [state(0, mower_id=OTHER_MOWER, activity="error", error_code="E9")])
    async with aiohttp.ClientSession() as http:
        [alarm] = await eventually(
            lambda: _items(http, service.url, VIEWER), what="the first-sight alarm listed"
        )
    assert (alarm["mower_id"], alarm["condition"], alarm["state"]) == (
        str(OTHER_MOWER),
        "error:E9",
        "active",
    )
    assert counted(service, "alarm_changes", change="raised", kind="mower_stuck") == 1


async def test_bad_queries_and_unknown_alarms_get_specific_answers(
    service: NotificationsService,
) -> None:
    async with aiohttp.ClientSession() as http:
        url = service.url
        for query, field in (
            ("?state=open", "state"),
            ("?severity=loud", "severity"),
            ("?limit=0", "limit"),
            ("?after=nonsense", "after"),
            ("?mower=not-an-id", "mower"),
        ):
            async with http.get(f"{url}/v1/alarms{query}", headers=_headers(VIEWER)) as r:
                assert r.status == 400, query
                assert (await r.json())["field"] == field
        async with http.get(f"{url}/v1/alarms?unknown=1", headers=_headers(VIEWER)) as r:
            assert r.status == 200  # unknown parameters are ignored
        for alarm_id in ("not-an-id", "00000000-0000-4000-8000-0000000000ff"):
            ack = f"{url}/v1/alarms/{alarm_id}/acknowledge"
            async with http.post(ack, headers=_headers(OPERATOR), json={}) as r:
                assert r.status == 404
        async with http.get(f"{url}/v1/alarms", headers=_headers("stranger")) as r:
            assert r.status == 403  # can view nothing in the account


async def _items(
    http: aiohttp.ClientSession, url: str, user: str, query: str = ""
) -> list[Any] | None:
    items: list[Any] = (await _alarms(http, url, user, query))["items"]
    return items or None


async def test_an_unacknowledged_critical_alarm_is_told_to_the_admins_once(
    make_service: ServiceFactory,
    authorizer: LocalAuthorizer,
    stores: Stores,
    bus: Bus,
    clock: Clock,
) -> None:
    for user, role in ((OPERATOR, "operator"), (ADMIN, "admin")):
        await grant(authorizer, user, role)
        await subscribe(stores, user)
    service = await make_service(
        notifications_escalate_after_seconds=60, notifications_alarm_round_seconds=0.05
    )
    await publish_states(
        bus,
        [
            state(0, activity="mowing"),
            state(10, activity="error", error_code="E42"),
            state(0, mower_id=OTHER_MOWER, activity="mowing"),
            state(10, mower_id=OTHER_MOWER, activity="error", error_code="E7"),
        ],
    )
    both = await eventually(lambda: _open_alarms(stores, 2), what="both alarms raised")
    # One is acknowledged in time: acknowledging is what stops an escalation.
    [other] = [a for a in both if a.mower_id == OTHER_MOWER]
    await stores.alarms.acknowledge(other, OPERATOR, None, clock())
    clock.advance(120)
    escalated = await eventually(
        lambda: _kinds(stores, ADMIN, "alarm_escalated"), what="the admin told"
    )
    assert [(i.mower_id, i.severity, i.params["condition"]) for i in escalated] == [
        (MOWER, "critical", "error:E42")
    ]
    # The operator had the same fan-out (one transaction) and got the alarm, not this.
    assert await _kinds(stores, OPERATOR, "alarm_escalated") is None
    assert await _kinds(stores, OPERATOR, "mower_stuck") is not None
    for _ in range(2):  # later rounds escalate nothing again
        await service.parts.alarms.round()
    assert counted(service, "alarms_escalated") == 1
    assert len(await _kinds(stores, ADMIN, "alarm_escalated") or []) == 1


async def _open_alarms(stores: Stores, count: int) -> list[Any] | None:
    page = await stores.alarms.list_alarms(AlarmQuery(account_id=ACCOUNT), None)
    return page.items if len(page.items) == count else None


async def _kinds(stores: Stores, user: str, kind: str) -> list[Any] | None:
    found = [i for i in await inbox(stores, user) if i.kind == kind]
    return found or None
