"""Directory seed versus events, removal purge, and command results into the timeline."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg

from contracts.v1 import (
    CommandResult,
    MowerListReply,
    MowerListRequest,
    MowerRegistration,
    decode,
    encode,
)
from contracts.v1.fleet import Connection
from contracts.v1.subjects import COMMANDS, FLEET_MOWERS_LIST, result_subject
from mowdeck.kit.bus import Bus
from mowdeck.telemetry.parts import RESULTS_DURABLE, STATES_DURABLE
from tests.integration.telemetry.conftest import (
    ServiceFactory,
    pending_acks,
    publish_states,
    registration_event,
)
from tests.support.eventually import eventually
from tests.unit.telemetry.samples import ACCOUNT, MOWER, OTHER_ACCOUNT, at, state


def _registration(mower_id: uuid.UUID, account_id: uuid.UUID) -> MowerRegistration:
    return MowerRegistration(
        mower_id=mower_id, account_id=account_id, name="m", connection=Connection(kind="simulator")
    )


async def _fleet_responder(bus: Bus, mowers: list[MowerRegistration], asked: list[int]) -> object:
    async def answer(msg: object) -> None:
        request = decode(msg.data, MowerListRequest)  # type: ignore[attr-defined]
        asked.append(request.shard_count)
        await msg.respond(encode(MowerListReply(mowers=mowers)))  # type: ignore[attr-defined]

    return await bus.nc.subscribe(FLEET_MOWERS_LIST, cb=answer)


async def test_seed_retries_until_fleet_answers_and_events_win(
    make_service: ServiceFactory, bus: Bus
) -> None:
    late, evented = uuid.UUID(int=501), uuid.UUID(int=502)
    service = await make_service(seed=True)  # no Fleet yet: not fatal
    store = service.parts.store
    await bus.publish_event(registration_event("mower.registered", evented, ACCOUNT, 5))
    await eventually(lambda: store.directory_account(evented))
    seeded = service.parts.seed.task
    assert seeded is not None
    assert not seeded.done()
    asked: list[int] = []
    # Fleet's (stale) view says the evented mower belongs elsewhere: the event wins.
    sub = await _fleet_responder(
        bus, [_registration(late, ACCOUNT), _registration(evented, OTHER_ACCOUNT)], asked
    )
    try:
        await asyncio.wait_for(asyncio.shield(seeded), 5)
    finally:
        await sub.unsubscribe()  # type: ignore[attr-defined]
    assert asked == [1]
    assert await store.directory_account(late) == ACCOUNT
    assert await store.directory_account(evented) == ACCOUNT


async def test_removal_purges_everything(
    make_service: ServiceFactory, bus: Bus, pool: asyncpg.Pool
) -> None:
    service = await make_service()
    await bus.publish_event(registration_event("mower.registered", MOWER, ACCOUNT, 0))
    await publish_states(bus, [state(0), state(10, battery=1, lat=52.6)])
    await bus.publish_result(
        CommandResult(command_id=uuid.uuid4(), mower_id=MOWER, status="accepted", at=at(1))
    )

    async def stored() -> bool:
        counts = [
            await pool.fetchval(f"SELECT count(*) FROM {t}")  # noqa: S608
            for t in ("mower_latest", "mower_history", "mower_positions", "command_timeline")
        ]
        return counts == [1, 2, 2, 1]

    await eventually(stored)
    await bus.publish_event(registration_event("mower.removed", MOWER, ACCOUNT, 20))

    async def purged() -> bool:
        counts = [
            await pool.fetchval(f"SELECT count(*) FROM {t}")  # noqa: S608
            for t in ("mower_latest", "mower_history", "mower_positions", "command_timeline")
        ]
        return counts == [0, 0, 0, 0]

    await eventually(purged)
    assert await service.parts.store.directory_account(MOWER) is None
    # A later state starts afresh: the removed mower's actor forgot its memory.
    await publish_states(bus, [state(30)])
    await eventually(lambda: pool.fetchval("SELECT count(*) FROM mower_history"))
    await eventually(lambda: _nothing_pending(bus, STATES_DURABLE))


async def _nothing_pending(bus: Bus, durable: str, stream: str = "TELEMETRY") -> bool:
    return await pending_acks(bus, durable, stream) == (0, 0)


async def _count_is(pool: asyncpg.Pool, query: str, expected: int) -> bool:
    return await pool.fetchval(query) == expected


async def test_results_become_the_timeline_with_the_directory_account(
    make_service: ServiceFactory, bus: Bus, pool: asyncpg.Pool
) -> None:
    service = await make_service()
    await bus.publish_event(registration_event("mower.registered", MOWER, ACCOUNT))
    command = uuid.uuid4()
    for status, seconds in (("accepted", 1), ("executed", 2)):
        await bus.publish_result(
            CommandResult(
                command_id=command, mower_id=MOWER, status=status, at=at(seconds), kind="start_mow"
            )
        )
    # A result may arrive before the registration and wait for a redelivery; while it
    # waits, the consumer reports nothing pending. So wait for the rows first.
    timeline = "SELECT count(*) FROM command_timeline"
    await eventually(lambda: _count_is(pool, timeline, 2), what="two timeline rows")
    await eventually(lambda: _nothing_pending(bus, RESULTS_DURABLE, "COMMANDS"))
    rows = await pool.fetch("SELECT status, account_id, kind FROM command_timeline ORDER BY at")
    assert [tuple(r) for r in rows] == [
        ("accepted", ACCOUNT, "start_mow"),
        ("executed", ACCOUNT, "start_mow"),
    ]
    written = service.metrics_registry.get_sample_value(
        "mowdeck_telemetry_rows_written_total", {"table": "command_timeline"}
    )
    assert written == 2


async def test_a_result_postgresql_refuses_is_terminated(
    make_service: ServiceFactory, bus: Bus, pool: asyncpg.Pool
) -> None:
    service = await make_service()
    store = service.parts.store
    await bus.publish_event(registration_event("mower.registered", MOWER, ACCOUNT))
    await eventually(lambda: store.directory_account(MOWER))  # no redelivery for that
    command = uuid.uuid4()
    await bus.publish_result(
        CommandResult(
            command_id=command, mower_id=MOWER, status="failed", at=at(1), reason="motor\x00stalled"
        )
    )
    await bus.publish_result(
        CommandResult(command_id=command, mower_id=MOWER, status="accepted", at=at(0))
    )
    await eventually(lambda: _nothing_pending(bus, RESULTS_DURABLE, "COMMANDS"))
    rows = await pool.fetch("SELECT status FROM command_timeline")
    assert [r[0] for r in rows] == ["accepted"]
    sample = service.metrics_registry.get_sample_value
    assert sample("mowdeck_telemetry_dropped_total", {"reason": "rejected-by-store"}) == 1
    info = await bus.js.consumer_info(COMMANDS.name, RESULTS_DURABLE)
    assert info.num_redelivered == 0


async def test_result_for_unknown_mower_is_redelivered_then_dropped(
    make_service: ServiceFactory, bus: Bus, pool: asyncpg.Pool
) -> None:
    service = await make_service()
    stranger = uuid.UUID(int=909)
    await bus.publish_result(
        CommandResult(command_id=uuid.uuid4(), mower_id=stranger, status="accepted", at=at(0))
    )
    await bus.publish(result_subject(MOWER), b"[]", msg_id="junk")
    await eventually(lambda: _nothing_pending(bus, RESULTS_DURABLE, "COMMANDS"))
    info = await bus.js.consumer_info(COMMANDS.name, RESULTS_DURABLE)
    # Two messages; the unknown mower's result was delivered three times, the junk once.
    assert (info.delivered.stream_seq, info.delivered.consumer_seq) == (2, 4)
    sample = service.metrics_registry.get_sample_value
    assert sample("mowdeck_telemetry_dropped_total", {"reason": "unknown-mower"}) == 1
    assert sample("mowdeck_telemetry_dropped_total", {"reason": "malformed"}) == 1
    assert await pool.fetchval("SELECT count(*) FROM command_timeline") == 0


async def test_result_waits_for_a_late_registration(
    make_service: ServiceFactory, bus: Bus, pool: asyncpg.Pool
) -> None:
    await make_service(telemetry_unknown_mower_attempts=50)
    await bus.publish_result(
        CommandResult(command_id=uuid.uuid4(), mower_id=MOWER, status="accepted", at=at(0))
    )

    async def redelivered() -> bool:  # refused for the unknown mower, and tried again
        info = await bus.js.consumer_info(COMMANDS.name, RESULTS_DURABLE)
        return bool(info.num_redelivered)

    await eventually(redelivered, what="a redelivery of the result")
    await bus.publish_event(registration_event("mower.registered", MOWER, ACCOUNT))
    await eventually(lambda: pool.fetchval("SELECT count(*) FROM command_timeline"))
