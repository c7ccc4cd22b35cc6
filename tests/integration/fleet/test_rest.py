"""The registry API on real NATS and PostgreSQL: lifecycle, events, bad inputs."""

from __future__ import annotations

import asyncio
import uuid

import aiohttp

from contracts.v1 import decode_event
from contracts.v1.subjects import MSG_ID_HEADER
from mowdeck.authz import Authorizer, grant_tuples
from mowdeck.fleet import FleetService
from mowdeck.fleet.rules import MAX_OPTIONS_BYTES
from mowdeck.kit.bus import Bus
from tests.integration.fleet.conftest import Api


async def owner(http: aiohttp.ClientSession, fleet: FleetService, authorizer: Authorizer) -> Api:
    """A user who administers a fresh account."""
    api = Api(http, fleet.url, f"owner-{uuid.uuid4().hex[:6]}", uuid.uuid4())
    await authorizer.write(grant_tuples(api.account, api.user, "admin"))
    return api


async def events(bus: Bus, count: int, timeout: float = 5.0) -> list[tuple[str, str, object]]:
    """The first ``count`` mower events in the EVENTS stream: (subject, msg id, envelope)."""
    sub = await bus.js.subscribe("event.mower.>", ordered_consumer=True)
    found = []
    try:
        for _ in range(count):
            msg = await sub.next_msg(timeout=timeout)
            found.append((msg.subject, msg.headers[MSG_ID_HEADER], decode_event(msg.data)))
    finally:
        await sub.unsubscribe()
    return found


async def test_register_read_rename_remove_publishes_each_change(
    fleet: FleetService, bus: Bus, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    api = await owner(http, fleet, authorizer)
    status, created = await api.call(
        "POST",
        "/v1/mowers",
        {"name": "Front lawn", "connection": {"kind": "simulator", "options": {"port": 7001}}},
    )
    assert status == 201
    mower_id = created["mower_id"]
    assert created == {
        "mower_id": mower_id,
        "account_id": str(api.account),
        "name": "Front lawn",
        "connection": {"kind": "simulator", "options": {"port": 7001}},
        "site_id": None,
    }
    status, got = await api.call("GET", f"/v1/mowers/{mower_id}")
    assert (status, got["name"], got["connection"]["options"]) == (
        200,
        "Front lawn",
        {"port": 7001},
    )
    status, listed = await api.call("GET", "/v1/mowers")
    assert [m["mower_id"] for m in listed["mowers"]] == [mower_id]

    status, patched = await api.call("PATCH", f"/v1/mowers/{mower_id}", {"name": "Back lawn"})
    assert (status, patched["name"], patched["connection"]["kind"]) == (
        200,
        "Back lawn",
        "simulator",
    )
    status, _ = await api.call("DELETE", f"/v1/mowers/{mower_id}")
    assert status == 204
    assert (await api.call("GET", f"/v1/mowers/{mower_id}"))[0] == 404

    seen = await events(bus, 3)
    assert [s for s, _, _ in seen] == [
        "event.mower.registered",
        "event.mower.updated",
        "event.mower.removed",
    ]
    for _, msg_id, event in seen:
        assert msg_id == str(event.id)  # type: ignore[attr-defined]
        assert str(event.payload.mower_id) == mower_id  # type: ignore[attr-defined]
    assert [e.payload.name for _, _, e in seen] == ["Front lawn", "Back lawn", "Back lawn"]  # type: ignore[attr-defined]


async def test_repeated_registration_with_the_same_id_is_idempotent_and_others_conflict(
    fleet: FleetService, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    api = await owner(http, fleet, authorizer)
    other = await owner(http, fleet, authorizer)
    body = {"mower_id": str(uuid.uuid4()), "name": "M", "connection": {"kind": "mqtt"}}
    assert (await api.call("POST", "/v1/mowers", body))[0] == 201
    assert (await api.call("POST", "/v1/mowers", body))[0] == 200
    assert (await api.call("POST", "/v1/mowers", {**body, "name": "N"}))[0] == 409
    assert (await other.call("POST", "/v1/mowers", body))[0] == 409
    # The other account still cannot see it.
    assert (await other.call("GET", f"/v1/mowers/{body['mower_id']}"))[0] == 404


async def test_bad_inputs_name_the_field_and_change_nothing(
    fleet: FleetService, bus: Bus, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    api = await owner(http, fleet, authorizer)
    ok = {"name": "M", "connection": {"kind": "simulator"}}
    cases = [
        ({"name": "x" * 101, "connection": {"kind": "simulator"}}, 422, "name"),
        ({"connection": {"kind": "simulator"}}, 422, "name"),
        ({"name": "M", "connection": {"kind": "carrier-pigeon"}}, 422, "connection.kind"),
        ({"name": "M", "connection": {"kind": "Bad Kind!"}}, 422, "connection.kind"),
        ({"name": "M", "connection": {"options": {}}}, 422, "connection.kind"),
        ({"name": "M", "connection": {"kind": "mqtt"}, "mower_id": "nope"}, 422, "mower_id"),
        ({"name": 5, "connection": {"kind": "mqtt"}}, 422, "name"),
        # Valid JSON, but no database stores a NUL character.
        ({"name": "a\u0000b", "connection": {"kind": "simulator"}}, 422, "name"),
        (
            {"name": "M", "connection": {"kind": "simulator", "options": {"host": "h\u0000"}}},
            422,
            "connection.options.host",
        ),
    ]
    for body, status, field in cases:
        got, problem = await api.call("POST", "/v1/mowers", body)
        assert (got, problem.get("field")) == (status, field), (body, problem)
        assert problem["detail"].startswith(f"`{field}`"), problem
    got, problem = await api.call(
        "POST", "/v1/mowers", raw=b'{"name": ', headers={"Content-Type": "application/json"}
    )
    assert (got, problem["type"].rsplit("/", 1)[-1]) == (400, "bad-request")
    got, _ = await api.call(
        "POST", "/v1/mowers", raw=b"", headers={"Content-Type": "application/json"}
    )
    assert got == 400
    got, _ = await api.call(
        "POST", "/v1/mowers", raw=b"name=M", headers={"Content-Type": "text/plain"}
    )
    assert got == 415
    async with http.post(fleet.url + "/v1/mowers", json=ok) as r:
        assert (r.status, r.headers["WWW-Authenticate"].startswith("Bearer")) == (401, True)
    assert (await api.call("GET", "/v1/mowers/not-a-uuid"))[0] == 404
    assert (await api.call("GET", f"/v1/mowers/{uuid.uuid4()}"))[0] == 404
    assert (await api.call("PATCH", f"/v1/mowers/{uuid.uuid4()}", {"name": "x"}))[0] == 404
    assert (await api.call("DELETE", f"/v1/mowers/{uuid.uuid4()}"))[0] == 404
    _, mower = await api.call("POST", "/v1/mowers", ok)
    got, problem = await api.call("PATCH", f"/v1/mowers/{mower['mower_id']}", {})
    assert got == 400
    got, problem = await api.call(
        "PATCH", f"/v1/mowers/{mower['mower_id']}", {"connection": {"kind": "nope"}}
    )
    assert (got, problem["field"]) == (422, "connection.kind")
    got, problem = await api.call("PATCH", f"/v1/mowers/{mower['mower_id']}", {"name": "\u0000"})
    assert (got, problem["field"]) == (422, "name")
    # Only the one good registration reached the bus.
    seen = await events(bus, 1)
    assert seen[0][0] == "event.mower.registered"
    info = await bus.js.stream_info("EVENTS")
    assert info.state.messages == 1


async def test_metrics_count_requests_by_route_and_status(
    fleet: FleetService, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    api = await owner(http, fleet, authorizer)
    await api.call("GET", f"/v1/mowers/{uuid.uuid4()}")
    await asyncio.sleep(0)
    async with http.get(fleet.url + "/metrics") as r:
        text = await r.text()
    series = 'method="GET",route="/v1/mowers/{mower_id}",status="404"'
    assert f"mowdeck_fleet_http_requests_total{{{series}}} 1.0" in text


async def test_oversized_connection_options_are_422_at_register_and_patch(
    fleet: FleetService, bus: Bus, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    api = await owner(http, fleet, authorizer)
    big = {"kind": "simulator", "options": {"blob": "x" * (MAX_OPTIONS_BYTES + 1)}}
    status, problem = await api.call("POST", "/v1/mowers", {"name": "M", "connection": big})
    assert (status, problem["field"]) == (422, "connection.options")
    assert problem["detail"].startswith("`connection.options`")
    assert str(MAX_OPTIONS_BYTES) in problem["detail"]
    status, mower = await api.call(
        "POST", "/v1/mowers", {"name": "M", "connection": {"kind": "simulator"}}
    )
    assert status == 201
    path = f"/v1/mowers/{mower['mower_id']}"
    status, problem = await api.call("PATCH", path, {"connection": big})
    assert (status, problem["field"]) == (422, "connection.options")
    assert (await api.call("GET", path))[1]["connection"] == {"kind": "simulator", "options": {}}
    await events(bus, 1)
    assert (await bus.js.stream_info("EVENTS")).state.messages == 1  # only the good one


async def test_a_deeply_nested_body_is_400_not_500(
    fleet: FleetService, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    api = await owner(http, fleet, authorizer)
    json_header = {"Content-Type": "application/json"}
    nested = b"[" * 20_000 + b"]" * 20_000  # past the decoder's limit on every Python
    bodies = [
        b'{"name": "M", "connection": {"kind": "simulator"}, "x": ' + nested + b"}",
        b'{"name": "M", "connection": {"kind": "simulator", "options": {"a": ' + nested + b"}}}",
    ]
    for raw in bodies:
        status, problem = await api.call("POST", "/v1/mowers", raw=raw, headers=json_header)
        assert (status, problem["type"].rsplit("/", 1)[-1]) == (400, "too-deep")
    _, mower = await api.call("POST", "/v1/mowers", {"name": "M", "connection": {"kind": "mqtt"}})
    path = f"/v1/mowers/{mower['mower_id']}"
    for method, target in (("PATCH", path), ("POST", f"{path}/commands")):
        status, _ = await api.call(
            method, target, raw=b'{"x": ' + nested + b"}", headers=json_header
        )
        assert status == 400
    # Options that decode but nest deeper than any adapter needs are refused by name.
    deep: dict[str, object] = {}
    for _ in range(40):  # deeper than options may nest, not than a body may
        deep = {"a": deep}
    status, problem = await api.call(
        "POST", "/v1/mowers", {"name": "M", "connection": {"kind": "simulator", "options": deep}}
    )
    assert (status, problem["field"]) == (422, "connection.options")


async def test_a_device_url_the_gateways_would_not_dial_is_422_at_register_and_patch(
    fleet: FleetService, bus: Bus, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    # The tests' MOWDECK_GATEWAY_DEVICE_HOSTS is ["127.0.0.1"] (any port).
    api = await owner(http, fleet, authorizer)
    for url in ("ws://10.0.0.1:5432/", "ws://169.254.169.254/latest", "ws://localhost:4222/"):
        connection = {"kind": "simulator", "options": {"url": url}}
        status, problem = await api.call(
            "POST", "/v1/mowers", {"name": "M", "connection": connection}
        )
        assert (status, problem["field"]) == (422, "connection.options.url"), url
        assert problem["detail"].startswith("`connection.options.url`")
        assert "MOWDECK_GATEWAY_DEVICE_HOSTS" in problem["detail"]
    good = {"kind": "simulator", "options": {"url": "ws://127.0.0.1:8090/mowers/x/ws"}}
    status, mower = await api.call("POST", "/v1/mowers", {"name": "M", "connection": good})
    assert status == 201
    path = f"/v1/mowers/{mower['mower_id']}"
    evil = {"kind": "simulator", "options": {"url": "ws://10.0.0.1:22/"}}
    status, problem = await api.call("PATCH", path, {"connection": evil})
    assert (status, problem["field"]) == (422, "connection.options.url")
    assert (await api.call("GET", path))[1]["connection"] == good
    await events(bus, 1)
    assert (await bus.js.stream_info("EVENTS")).state.messages == 1  # only the good one
