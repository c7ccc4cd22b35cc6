"""State ingest against real NATS and PostgreSQL: rules, guards, redelivery and drops."""

from __future__ import annotations

import random
import uuid

import asyncpg
import pytest

from contracts.v1 import encode
from contracts.v1.subjects import telemetry_subject
from mowdeck.kit.bus import Bus
from mowdeck.telemetry import ingest
from mowdeck.telemetry.parts import STATES_DURABLE
from tests.integration.telemetry.conftest import (
    ServiceFactory,
    pending_acks,
    publish_states,
    registration_event,
)
from tests.support.eventually import eventually
from tests.unit.telemetry.samples import ACCOUNT, MOWER, OTHER_ACCOUNT, at, state


async def _count(pool: asyncpg.Pool, table: str, mower: uuid.UUID = MOWER) -> int:
    return int(await pool.fetchval(f"SELECT count(*) FROM {table} WHERE mower_id = $1", mower))  # noqa: S608


async def _settled(bus: Bus) -> bool:
    return await pending_acks(bus, STATES_DURABLE) == (0, 0)


async def _metric(service: object, name: str, **labels: str) -> float:
    value = service.metrics_registry.get_sample_value(name, labels or None)  # type: ignore[attr-defined]
    return float(value or 0.0)


async def test_heartbeats_changes_and_moves(
    make_service: ServiceFactory, bus: Bus, pool: asyncpg.Pool
) -> None:
    service = await make_service()
    states = [state(10 * i) for i in range(60)]  # 10 minutes of unchanged heartbeats
    states.append(state(601, battery=79))  # a change
    states.append(state(611, battery=79, lat=52.5001))  # a move
    await publish_states(bus, states)
    await eventually(lambda: _settled(bus))
    latest = await pool.fetchrow("SELECT observed_at, battery, lat FROM mower_latest")
    assert (latest["observed_at"], latest["battery"], latest["lat"]) == (at(611), 79, 52.5001)
    history = await pool.fetch("SELECT observed_at FROM mower_history ORDER BY observed_at")
    assert [r[0] for r in history] == [at(0), at(300), at(601)]
    positions = await pool.fetch("SELECT observed_at FROM mower_positions ORDER BY observed_at")
    assert [r[0] for r in positions] == [at(0), at(611)]
    assert await _metric(service, "mowdeck_telemetry_states_received_total") == 62
    assert await _metric(service, "mowdeck_telemetry_heartbeats_skipped_total") == 59
    written = await _metric(service, "mowdeck_telemetry_rows_written_total", table="mower_history")
    assert written == 3


async def test_redelivery_and_out_of_order_states(
    make_service: ServiceFactory, bus: Bus, pool: asyncpg.Pool
) -> None:
    await make_service()
    await publish_states(bus, [state(100, battery=50)])
    await eventually(lambda: _settled(bus))
    # The same state again (as a redelivery would bring it) and an older, different one.
    again = [state(100, battery=50), state(50, battery=60), state(60, battery=60)]
    await publish_states(bus, again)
    await eventually(lambda: _settled(bus))
    latest = await pool.fetchrow("SELECT observed_at, battery FROM mower_latest")
    assert (latest["observed_at"], latest["battery"]) == (at(100), 50)
    history = await pool.fetch("SELECT observed_at, battery FROM mower_history ORDER BY 1")
    assert [(r[0], r[1]) for r in history] == [(at(50), 60), (at(60), 60), (at(100), 50)]


async def test_actor_memory_survives_a_restart(
    make_service: ServiceFactory, bus: Bus, pool: asyncpg.Pool
) -> None:
    first = await make_service()
    await publish_states(bus, [state(0), state(10)])
    await eventually(lambda: _settled(bus))
    await first.stop()
    await make_service()  # a new replica: its actor starts from the stored row
    await publish_states(bus, [state(20), state(300)])
    await eventually(lambda: _settled(bus))
    history = await pool.fetch("SELECT observed_at FROM mower_history ORDER BY 1")
    assert [r[0] for r in history] == [at(0), at(300)]


async def test_two_replicas_racing_keep_the_newest_latest_row(
    make_service: ServiceFactory, bus: Bus, pool: asyncpg.Pool
) -> None:
    a = await make_service(telemetry_batch_max=7)
    b = await make_service(telemetry_batch_max=5)
    mowers = [uuid.UUID(int=i + 1) for i in range(5)]
    rng = random.Random(7)
    states = [state(i, mower_id=m, speed_mps=i / 100) for m in mowers for i in range(120)]
    rng.shuffle(states)
    await publish_states(bus, states)
    await eventually(lambda: _settled(bus))
    rows = await pool.fetch("SELECT mower_id, observed_at, speed_mps FROM mower_latest")
    assert {r["mower_id"]: (r["observed_at"], r["speed_mps"]) for r in rows} == {
        m: (at(119), 1.19) for m in mowers
    }
    # Every state changed the speed, so each is a history row exactly once.
    assert await pool.fetchval("SELECT count(*) FROM mower_history") == 600
    received = [await _metric(s, "mowdeck_telemetry_states_received_total") for s in (a, b)]
    assert all(r > 0 for r in received), received  # both replicas took part


async def test_drop_paths_terminate_without_redelivery(
    make_service: ServiceFactory, bus: Bus, pool: asyncpg.Pool
) -> None:
    service = await make_service()
    other = uuid.UUID(int=77)
    registered = uuid.UUID(int=78)
    await bus.publish_event(registration_event("mower.registered", registered, ACCOUNT))
    await eventually(lambda: service.parts.store.directory_account(registered))
    await bus.publish(telemetry_subject(MOWER), b"{not json", msg_id="bad-1")
    await bus.publish(telemetry_subject(MOWER), b'{"mower_id": 1}', msg_id="bad-2")
    await publish_states(bus, [state(0)])  # stored with ACCOUNT
    await eventually(lambda: _settled(bus))
    # Subject names another mower; account differs from the stored row; from the directory.
    await bus.publish(
        telemetry_subject(other),
        encode(state(5)),
        msg_id="wrong-subject",
    )
    await publish_states(
        bus,
        [
            state(10, account_id=OTHER_ACCOUNT),
            state(0, mower_id=registered, account_id=OTHER_ACCOUNT),
        ],
    )
    await eventually(lambda: _settled(bus))
    reasons = {
        reason: await _metric(service, "mowdeck_telemetry_dropped_total", reason=reason)
        for reason in (
            "malformed",
            "subject-mismatch",
            "account-mismatch-stored",
            "account-mismatch-directory",
        )
    }
    assert reasons == {
        "malformed": 2,
        "subject-mismatch": 1,
        "account-mismatch-stored": 1,
        "account-mismatch-directory": 1,
    }
    latest = await pool.fetch("SELECT mower_id, observed_at, account_id FROM mower_latest")
    assert [(r[0], r[1], r[2]) for r in latest] == [(MOWER, at(0), ACCOUNT)]
    assert await _count(pool, "mower_history", registered) == 0
    info = await bus.js.consumer_info("TELEMETRY", STATES_DURABLE)
    assert info.num_redelivered == 0


async def test_other_telemetry_subjects_are_acknowledged_unread(
    make_service: ServiceFactory, bus: Bus, pool: asyncpg.Pool
) -> None:
    # The states consumer reads the whole TELEMETRY stream (cheaper for JetStream than a
    # narrower filter); whatever is not telemetry.mower.<id> is not a state of ours.
    service = await make_service()
    info = await bus.js.consumer_info("TELEMETRY", STATES_DURABLE)
    assert info.config.filter_subject == "telemetry.>"
    await bus.publish("telemetry.site.7", encode(state(0)), msg_id="site")
    await bus.publish(f"telemetry.mower.{MOWER}.extra", encode(state(1)), msg_id="deeper")
    await bus.publish("telemetry.mower.not-a-uuid", encode(state(2)), msg_id="bad-token")
    await publish_states(bus, [state(3)])
    await eventually(lambda: _settled(bus))
    latest = await pool.fetch("SELECT observed_at FROM mower_latest")
    assert [r[0] for r in latest] == [at(3)]
    assert await _metric(service, "mowdeck_telemetry_foreign_subjects_total") == 2
    assert await _metric(service, "mowdeck_telemetry_dropped_total", reason="malformed") == 1
    assert await _metric(service, "mowdeck_telemetry_states_received_total") == 2
    info = await bus.js.consumer_info("TELEMETRY", STATES_DURABLE)
    assert info.num_redelivered == 0


async def test_states_postgresql_cannot_store_are_terminated(
    make_service: ServiceFactory, bus: Bus, pool: asyncpg.Pool
) -> None:
    service = await make_service()
    mowers = [uuid.UUID(int=i + 1) for i in range(4)]
    poisoned = {
        mowers[1]: {"error_code": "E\x00"},
        mowers[2]: {"raw": {"fw": "1.2\x00"}},
    }
    # One batch: without the check the whole commit fails and every mower is redelivered.
    await publish_states(bus, [state(0, mower_id=m, **poisoned.get(m, {})) for m in mowers])
    await eventually(lambda: _settled(bus))
    rows = await pool.fetch("SELECT mower_id FROM mower_latest ORDER BY mower_id")
    assert [r[0] for r in rows] == [mowers[0], mowers[3]]
    assert await _metric(service, "mowdeck_telemetry_dropped_total", reason="malformed") == 2
    info = await bus.js.consumer_info("TELEMETRY", STATES_DURABLE)
    assert info.num_redelivered == 0


async def test_a_mower_postgresql_refuses_is_split_off_its_batch(
    make_service: ServiceFactory, bus: Bus, pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Stands for any value the decode-time check does not know PostgreSQL refuses.
    monkeypatch.setattr(ingest, "nul_field", lambda _: None)
    service = await make_service(telemetry_batch_linger_ms=200.0)
    mowers = [uuid.UUID(int=i + 1) for i in range(6)]
    refused = mowers[3]
    states = [
        state(seconds, mower_id=m, error_code="E\x00" if m == refused and seconds else None)
        for m in mowers
        for seconds in (0, 10)
    ]
    await publish_states(bus, states)
    await eventually(lambda: _settled(bus))
    rows = await pool.fetch("SELECT mower_id, observed_at FROM mower_latest ORDER BY mower_id")
    assert [(r[0], r[1]) for r in rows] == [(m, at(10)) for m in mowers if m != refused]
    assert await _count(pool, "mower_history", refused) == 0
    dropped = await _metric(service, "mowdeck_telemetry_dropped_total", reason="rejected-by-store")
    assert dropped in (1, 2)  # the refused state, and the clean one if it shared its batch
    info = await bus.js.consumer_info("TELEMETRY", STATES_DURABLE)
    assert info.num_redelivered == 0
