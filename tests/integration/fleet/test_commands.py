"""Issuing commands: envelopes on the bus, 422 before publishing, waiting, status lookup."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import aiohttp
import asyncpg
import pytest
from structlog.contextvars import merge_contextvars
from structlog.testing import capture_logs

from contracts.v1 import CommandEnvelope, CommandResult, decode_command, encode
from contracts.v1.subjects import MSG_ID_HEADER, PRIORITY_HEADER, result_subject
from mowdeck.authz import Authorizer, grant_tuples
from mowdeck.fleet import FleetService
from mowdeck.fleet.results import RECORDER_DURABLE
from mowdeck.kit.bus import Bus
from mowdeck.kit.logging import ids_as_text
from tests.integration.fleet.conftest import Api, start_fleet
from tests.integration.fleet.test_rest import owner


async def registered(api: Api) -> str:
    """Register a mower and return its id."""
    status, body = await api.call(
        "POST", "/v1/mowers", {"name": "M", "connection": {"kind": "simulator"}}
    )
    assert status == 201
    return str(body["mower_id"])


async def commands_on_bus(bus: Bus, mower_id: str) -> list[tuple[dict[str, str], CommandEnvelope]]:
    """Every command published for a mower so far."""
    info = await bus.js.stream_info("COMMANDS")
    found = []
    if info.state.messages == 0:
        return found
    sub = await bus.js.subscribe(f"command.mower.{mower_id}", ordered_consumer=True)
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=0.3)
            except TimeoutError:
                break
            found.append((dict(msg.headers or {}), decode_command(msg.data)))
    finally:
        await sub.unsubscribe()
    return found


async def test_a_command_is_published_with_its_headers_and_answered_202(
    fleet: FleetService, bus: Bus, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    api = await owner(http, fleet, authorizer)
    mower_id = await registered(api)
    before = datetime.now(UTC)
    status, body = await api.call(
        "POST",
        f"/v1/mowers/{mower_id}/commands",
        {"command": {"kind": "set_blade_height", "height_mm": 40}},
    )
    assert status == 202
    status, stop = await api.call(
        "POST",
        f"/v1/mowers/{mower_id}/commands",
        {"command": {"kind": "emergency_stop", "reason": "child on lawn"}, "ttl_s": 5},
    )
    assert status == 202
    published = await commands_on_bus(bus, mower_id)
    assert [e.command_id for _, e in published] == [
        uuid.UUID(body["command_id"]),
        uuid.UUID(stop["command_id"]),
    ]
    (headers, first), (stop_headers, second) = published
    assert headers[MSG_ID_HEADER] == body["command_id"]
    assert (headers[PRIORITY_HEADER], stop_headers[PRIORITY_HEADER]) == ("normal", "emergency")
    assert first.issued_by == f"user:{api.user}"
    assert first.account_id == api.account
    assert first.issued_at >= before - timedelta(seconds=1)
    assert first.expires_at - first.issued_at == timedelta(seconds=30)
    assert second.expires_at - second.issued_at == timedelta(seconds=5)
    assert first.command.height_mm == 40  # type: ignore[union-attr]


async def test_a_request_the_contracts_reject_is_422_naming_the_field_and_not_published(
    fleet: FleetService, bus: Bus, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    api = await owner(http, fleet, authorizer)
    mower_id = await registered(api)
    path = f"/v1/mowers/{mower_id}/commands"
    cases = [
        ({"command": {"kind": "set_blade_height", "height_mm": 5}}, "command.height_mm"),
        ({"command": {"kind": "set_blade_height"}}, "command.height_mm"),
        ({"command": {"kind": "fly_away"}}, "command.kind"),
        ({"command": {"height_mm": 40}}, "command.kind"),
        (
            {"command": {"kind": "manual_drive", "linear_mps": 3, "angular_rps": 0}},
            "command.linear_mps",
        ),
        ({}, "command"),
        ({"command": {"kind": "pause_mow"}, "ttl_s": 0}, "ttl_s"),
        ({"command": {"kind": "pause_mow"}, "ttl_s": 100000}, "ttl_s"),
        ({"command": {"kind": "emergency_stop", "reason": "x\u0000"}}, "command.reason"),
    ]
    for body, field in cases:
        status, problem = await api.call("POST", path, body)
        assert (status, problem.get("field")) == (422, field), (body, problem)
    status, problem = await api.call(
        "POST", path + "?wait=forever", {"command": {"kind": "pause_mow"}}
    )
    assert (status, problem["field"]) == (422, "wait")
    status, _ = await api.call("POST", path, raw=b"{", headers={"Content-Type": "application/json"})
    assert status == 400
    status, _ = await api.call("POST", path, raw=b"x", headers={"Content-Type": "text/plain"})
    assert status == 415
    assert await commands_on_bus(bus, mower_id) == []


async def gateway(bus: Bus, statuses: list[str]) -> asyncio.Task[None]:
    """A stand-in gateway answering every command with ``statuses`` on the results subject."""
    sub = await bus.nc.subscribe("command.mower.*")

    async def run() -> None:
        try:
            async for msg in sub.messages:
                envelope = decode_command(msg.data)
                for status in statuses:
                    await bus.publish_result(
                        CommandResult(
                            command_id=envelope.command_id,
                            mower_id=envelope.mower_id,
                            status=status,  # type: ignore[arg-type]
                            at=datetime.now(UTC),
                            reason="blade jammed" if status == "failed" else None,
                        )
                    )
        finally:
            await sub.unsubscribe()

    return asyncio.create_task(run())


async def test_wait_returns_the_final_result_and_any_replica_reports_the_statuses(
    fleet: FleetService,
    bus: Bus,
    pool: asyncpg.Pool,
    authorizer: Authorizer,
    http: aiohttp.ClientSession,
) -> None:
    api = await owner(http, fleet, authorizer)
    mower_id = await registered(api)
    task = await gateway(bus, ["accepted", "failed"])
    replica = await start_fleet(bus, pool, authorizer)
    try:
        status, result = await api.call(
            "POST", f"/v1/mowers/{mower_id}/commands?wait=5", {"command": {"kind": "start_mow"}}
        )
        assert (status, result["status"], result["reason"]) == (200, "failed", "blade jammed")
        command_id = result["command_id"]
        other = Api(http, replica.url, api.user, api.account)
        for _ in range(50):
            status, found = await other.call("GET", f"/v1/mowers/{mower_id}/commands/{command_id}")
            if status == 200 and len(found["statuses"]) == 2:
                break
            await asyncio.sleep(0.05)
        assert [s["status"] for s in found["statuses"]] == ["accepted", "failed"]
        assert (found["kind"], found["final"], found["issued_by"]) == (
            "start_mow",
            True,
            f"user:{api.user}",
        )
        assert (await other.call("GET", f"/v1/mowers/{mower_id}/commands/{uuid.uuid4()}"))[0] == 404
        # The command belongs to another mower: not found under this one.
        second = await registered(api)
        assert (await other.call("GET", f"/v1/mowers/{second}/commands/{command_id}"))[0] == 404
    finally:
        task.cancel()
        await replica.stop()


async def test_wait_without_a_final_result_answers_202_pending(
    fleet: FleetService, bus: Bus, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    api = await owner(http, fleet, authorizer)
    mower_id = await registered(api)
    task = await gateway(bus, ["accepted"])
    try:
        status, body = await api.call(
            "POST", f"/v1/mowers/{mower_id}/commands?wait=0.3", {"command": {"kind": "pause_mow"}}
        )
        assert (status, body["status"]) == (202, "pending")
        # Just issued: the issuing instance knows it even before the recorder stored it.
        status, found = await api.call(
            "GET", f"/v1/mowers/{mower_id}/commands/{body['command_id']}"
        )
        assert (status, found["final"]) == (200, False)
    finally:
        task.cancel()


async def test_a_202_command_is_found_at_once_by_another_replica(
    fleet: FleetService,
    bus: Bus,
    pool: asyncpg.Pool,
    authorizer: Authorizer,
    http: aiohttp.ClientSession,
) -> None:
    api = await owner(http, fleet, authorizer)
    mower_id = await registered(api)
    replica = await start_fleet(bus, pool, authorizer)
    try:
        other = Api(http, replica.url, api.user, api.account)
        sent = [
            api.call("POST", f"/v1/mowers/{mower_id}/commands", {"command": {"kind": "pause_mow"}})
            for _ in range(20)
        ]
        for posted, body in await asyncio.gather(*sent):
            assert posted == 202
            # No waiting and no retry: the command log had it before the 202.
            status, found = await other.call(
                "GET", f"/v1/mowers/{mower_id}/commands/{body['command_id']}"
            )
            assert (status, found["kind"], found["statuses"]) == (200, "pause_mow", [])
    finally:
        await replica.stop()


async def test_an_unrecordable_command_is_503_and_not_published(
    fleet: FleetService,
    bus: Bus,
    pool: asyncpg.Pool,
    authorizer: Authorizer,
    http: aiohttp.ClientSession,
) -> None:
    api = await owner(http, fleet, authorizer)
    mower_id = await registered(api)
    path = f"/v1/mowers/{mower_id}/commands"
    status, first = await api.call("POST", path, {"command": {"kind": "pause_mow"}})
    assert status == 202  # authorization and the mower are cached now
    await pool.execute("ALTER TABLE fleet_commands RENAME TO fleet_commands_away")
    try:
        status, problem = await api.call("POST", path, {"command": {"kind": "start_mow"}})
    finally:
        await pool.execute("ALTER TABLE fleet_commands_away RENAME TO fleet_commands")
    assert (status, problem["status"]) == (503, 503)
    published = await commands_on_bus(bus, mower_id)
    assert [str(e.command_id) for _, e in published] == [first["command_id"]]


async def test_a_command_jetstream_does_not_store_is_503(
    fleet: FleetService, bus: Bus, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    api = await owner(http, fleet, authorizer)
    mower_id = await registered(api)
    await bus.js.delete_stream("COMMANDS")
    status, problem = await api.call(
        "POST", f"/v1/mowers/{mower_id}/commands", {"command": {"kind": "pause_mow"}}
    )
    assert (status, problem["type"]) == (503, "https://mowdeck.dev/problems/unavailable")


async def test_an_envelope_the_contract_refuses_is_422_naming_its_field(
    fleet: FleetService, bus: Bus, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    api = await owner(http, fleet, authorizer)
    mower_id = await registered(api)
    # A user id longer than the envelope's `issued_by` allows (200 characters).
    long = Api(http, fleet.url, "u" * 250, api.account)
    await authorizer.write(grant_tuples(api.account, long.user, "operator"))
    status, problem = await long.call(
        "POST", f"/v1/mowers/{mower_id}/commands", {"command": {"kind": "pause_mow"}}
    )
    assert (status, problem["field"]) == (422, "issued_by")
    assert await commands_on_bus(bus, mower_id) == []


async def test_a_ttl_below_one_second_is_422_and_leaves_no_command_behind(
    fleet: FleetService,
    bus: Bus,
    pool: asyncpg.Pool,
    authorizer: Authorizer,
    http: aiohttp.ClientSession,
) -> None:
    api = await owner(http, fleet, authorizer)
    mower_id = await registered(api)
    for ttl in (0.0003, 0.5):
        status, problem = await api.call(
            "POST",
            f"/v1/mowers/{mower_id}/commands",
            {"command": {"kind": "pause_mow"}, "ttl_s": ttl},
        )
        assert (status, problem["field"]) == (422, "ttl_s"), problem
    rows = await pool.fetchval(
        "SELECT count(*) FROM fleet_commands WHERE mower_id = $1", uuid.UUID(mower_id)
    )
    assert rows == 0
    assert await commands_on_bus(bus, mower_id) == []


async def test_a_result_with_a_nul_character_does_not_hold_back_the_others(
    fleet: FleetService, bus: Bus, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    api = await owner(http, fleet, authorizer)
    mower_id = await registered(api)
    path = f"/v1/mowers/{mower_id}/commands"
    ids = []
    for _ in range(2):
        status, body = await api.call("POST", path, {"command": {"kind": "pause_mow"}})
        assert status == 202
        ids.append(uuid.UUID(body["command_id"]))
    poisoned, good = (
        CommandResult(
            command_id=command_id,
            mower_id=uuid.UUID(mower_id),
            status="failed",
            at=datetime.now(UTC),
            reason=reason,
        )
        for command_id, reason in zip(ids, ["jam\u0000med", "blade jammed"], strict=True)
    )
    # Published together, so that they are very likely recorded in one batch.
    acks = [
        await bus.publish_nowait(result_subject(r.mower_id), encode(r), msg_id=r.msg_id)
        for r in (poisoned, good)
    ]
    await asyncio.gather(*acks)
    for _ in range(100):
        status, found = await api.call("GET", f"{path}/{good.command_id}")
        if found["statuses"]:
            break
        await asyncio.sleep(0.05)
    assert [s["reason"] for s in found["statuses"]] == ["blade jammed"]
    status, found = await api.call("GET", f"{path}/{poisoned.command_id}")
    assert (status, found["statuses"]) == (200, [])
    for _ in range(100):  # terminated, not redelivered for ever
        info = await bus.js.consumer_info("COMMANDS", RECORDER_DURABLE)
        if info.num_ack_pending == 0 and info.num_pending == 0:
            break
        await asyncio.sleep(0.05)
    assert (info.num_ack_pending, info.num_pending) == (0, 0)


async def test_a_failed_command_request_is_logged_naming_its_mower_command_and_account(
    fleet: FleetService,
    pool: asyncpg.Pool,
    authorizer: Authorizer,
    http: aiohttp.ClientSession,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = await owner(http, fleet, authorizer)
    mower_id = await registered(api)

    async def broken(envelope: CommandEnvelope, body: bytes) -> None:
        raise RuntimeError("a bug in publishing")

    monkeypatch.setattr(fleet.parts.fleet.publisher, "publish", broken)
    with capture_logs(processors=[merge_contextvars, ids_as_text]) as logs:
        status, _ = await api.call(
            "POST", f"/v1/mowers/{mower_id}/commands", {"command": {"kind": "pause_mow"}}
        )
    assert status == 500
    [failed] = [line for line in logs if line["event"] == "unhandled error"]
    # Recorded before it was published: the command the request had issued.
    recorded = await pool.fetchval(
        "SELECT command_id FROM fleet_commands WHERE mower_id = $1", uuid.UUID(mower_id)
    )
    assert failed["service"] == "fleet"
    assert (failed["mower_id"], failed["account_id"]) == (mower_id, str(api.account))
    assert failed["command_id"] == str(recorded)
