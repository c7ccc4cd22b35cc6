"""Commands no result comes for: Fleet records them failed (outcome unknown), never pending."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import aiohttp
import asyncpg
from nats.aio.msg import Msg

from contracts.v1 import CommandResult
from contracts.v1.subjects import RESULT_FILTER
from mowdeck.authz import Authorizer
from mowdeck.fleet.ports import UNANSWERED_REASON
from mowdeck.kit.bus import Bus
from tests.integration.fleet.conftest import Api, start_fleet
from tests.integration.fleet.test_commands import registered
from tests.integration.fleet.test_rest import owner
from tests.support.eventually import eventually

# No gateway serves the test's mowers: every command goes unanswered.
QUICK = {"fleet_command_result_grace_seconds": 0.5, "fleet_finalize_interval_seconds": 0.2}


async def status_of(api: Api, mower_id: str, command_id: str) -> dict[str, object]:
    status, found = await api.call("GET", f"/v1/mowers/{mower_id}/commands/{command_id}")
    assert status == 200
    return found  # type: ignore[no-any-return]


async def test_an_unanswered_command_is_recorded_failed_and_nothing_is_published(
    bus: Bus, pool: asyncpg.Pool, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    fleet = await start_fleet(bus, pool, authorizer, **QUICK)
    results: list[bytes] = []

    async def seen(msg: Msg) -> None:
        results.append(msg.data)

    sub = await bus.nc.subscribe(RESULT_FILTER, cb=seen)
    try:
        api = await owner(http, fleet, authorizer)
        mower_id = await registered(api)
        status, body = await api.call(
            "POST",
            f"/v1/mowers/{mower_id}/commands",
            {"command": {"kind": "start_mow"}, "ttl_s": 1},
        )
        assert status == 202
        command_id = body["command_id"]
        assert (await status_of(api, mower_id, command_id))["final"] is False

        async def finalized() -> bool:
            return (await status_of(api, mower_id, command_id))["final"] is True

        await eventually(finalized, timeout=10)
        found = await status_of(api, mower_id, command_id)
        assert [(s["status"], s["reason"]) for s in found["statuses"]] == [  # type: ignore[attr-defined]
            ("failed", UNANSWERED_REASON)
        ]
        assert results == []  # Fleet's record only: no result on the bus
        unanswered = fleet.metrics_registry.get_sample_value(
            "mowdeck_fleet_commands_unanswered_total"
        )
        assert unanswered is not None and unanswered >= 1

        # The true outcome, arriving late, is appended; the trail says who recorded what.
        await bus.publish_result(
            CommandResult(
                command_id=body["command_id"],
                mower_id=mower_id,  # type: ignore[arg-type]
                status="executed",
                at=datetime.now(UTC),
            )
        )

        async def appended() -> list[str]:
            found = await status_of(api, mower_id, command_id)
            statuses = [s["status"] for s in found["statuses"]]  # type: ignore[attr-defined]
            return statuses if len(statuses) > 1 else []

        assert await eventually(appended, what="late status") == ["failed", "executed"]
        status, page = await api.call("GET", f"/v1/audit?mower={mower_id}")
        assert status == 200
        (entry,) = page["commands"]
        assert [(s["status"], s["source"]) for s in entry["statuses"]] == [
            ("failed", "fleet"),
            ("executed", "gateway"),
        ]
    finally:
        await sub.unsubscribe()
        await fleet.stop()


async def test_a_wait_past_expiry_and_grace_answers_the_failure(
    bus: Bus, pool: asyncpg.Pool, authorizer: Authorizer, http: aiohttp.ClientSession
) -> None:
    # Rounds far apart: the waiter settles its command itself, at expiry plus the grace.
    fleet = await start_fleet(
        bus,
        pool,
        authorizer,
        fleet_command_result_grace_seconds=0.5,
        fleet_finalize_interval_seconds=3600,
    )
    try:
        api = await owner(http, fleet, authorizer)
        mower_id = await registered(api)
        started = time.monotonic()
        status, result = await api.call(
            "POST",
            f"/v1/mowers/{mower_id}/commands?wait=8",
            {"command": {"kind": "return_to_dock"}, "ttl_s": 1},
        )
        waited = time.monotonic() - started
        assert (status, result["status"], result["reason"]) == (200, "failed", UNANSWERED_REASON)
        assert 1.4 <= waited < 5, waited  # ttl 1 s plus 0.5 s grace, not the whole 8 s
        found = await status_of(api, mower_id, result["command_id"])
        assert (found["final"], len(found["statuses"])) == (True, 1)  # type: ignore[arg-type]
        # A wait that ends before expiry plus grace is still just pending.
        status, body = await api.call(
            "POST",
            f"/v1/mowers/{mower_id}/commands?wait=0.2",
            {"command": {"kind": "pause_mow"}, "ttl_s": 1},
        )
        assert (status, body["status"]) == (202, "pending")
    finally:
        await fleet.stop()
