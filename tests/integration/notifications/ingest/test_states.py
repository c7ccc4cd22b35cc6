"""The states on real PostgreSQL: a state the store refuses is split off and terminated."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
import structlog
from prometheus_client import CollectorRegistry

from actors import Dispatcher, LoopBridge, ShardSupervisor
from contracts.v1 import MowerState, encode
from contracts.v1.subjects import telemetry_subject
from mowdeck.notifications.infra import Stores
from mowdeck.notifications.ingest.actor import WatchSnapshots, actor_factory
from mowdeck.notifications.ingest.states import StateBatcher
from mowdeck.notifications.metrics import NotificationsMetrics
from mowdeck.notifications.rules.evaluate import Thresholds
from tests.support.fakes import FakeMsg

ACCOUNT = uuid.UUID("00000000-0000-4000-8000-0000000000a1")
T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def delivered(mower: uuid.UUID, seconds: int, **fields: object) -> FakeMsg:
    values: dict[str, object] = {"activity": "mowing", "battery": 80, **fields}
    state = MowerState(
        mower_id=mower,
        account_id=ACCOUNT,
        observed_at=T0 + timedelta(seconds=seconds),
        **values,  # type: ignore[arg-type]
    )
    return FakeMsg(encode(state), telemetry_subject(mower))


@pytest.fixture
async def pipeline(
    stores: Stores,
) -> AsyncIterator[tuple[StateBatcher, ShardSupervisor, CollectorRegistry]]:
    dispatcher = Dispatcher(workers=1, name="states-test")
    dispatcher.start()
    thresholds = Thresholds()
    snapshots = WatchSnapshots(stores.watches)
    supervisor = ShardSupervisor(dispatcher, actor_factory(dispatcher, thresholds), snapshots)
    registry = CollectorRegistry()
    states = StateBatcher(
        stores.watches,
        supervisor=supervisor,
        snapshots=snapshots,
        bridge=LoopBridge(asyncio.get_running_loop()),
        thresholds=thresholds,
        metrics=NotificationsMetrics(registry),
        consuming_since=lambda: T0 - timedelta(hours=1),
        clock=lambda: T0 + timedelta(minutes=1),
        on_events=lambda: None,
        batch_max=100,
        linger=0,
    )
    states.start()
    yield states, supervisor, registry
    await states.stop()
    await supervisor.stop_all()
    await asyncio.to_thread(dispatcher.stop)


async def settled(states: StateBatcher, msgs: list[FakeMsg]) -> list[str]:
    """Hand ``msgs`` to the pipeline as one batch; how each was settled first."""
    for msg in msgs:
        states.take(msg)
    return [await msg.wait_settled() for msg in msgs]


async def test_a_mower_whose_watch_the_store_refuses_is_split_off_the_batch(
    pipeline: tuple[StateBatcher, ShardSupervisor, CollectorRegistry], stores: Stores
) -> None:
    states, supervisor, registry = pipeline
    poisoned, others = uuid.UUID(int=5), [uuid.UUID(int=i) for i in (1, 2, 3, 4, 6, 7)]
    first = {m: delivered(m, 0) for m in [*others, poisoned]}
    assert await settled(states, list(first.values())) == ["ack"] * len(first)
    # A fault whose code holds a NUL character: the watch remembers the code, and
    # PostgreSQL refuses \u0000 in jsonb (SQLSTATE 22P05), whatever else the batch holds.
    refused = delivered(poisoned, 10, activity="error", error_code="E\x001")
    fine = {m: delivered(m, 10, battery=79) for m in others}
    with structlog.testing.capture_logs() as logs:
        await settled(states, [*fine.values(), refused])
    assert refused.outcome == "term"  # it was redelivered for ever before, and all with it
    assert {m: msg.outcome for m, msg in fine.items()} == dict.fromkeys(others, "ack")
    stored = await stores.watches.read_watches(others)
    assert all(w.observed_at == T0 + timedelta(seconds=10) for w in stored.values())
    [entry] = [e for e in logs if e["event"] == "states terminated"]
    assert (entry["reason"], entry["mower_id"]) == ("rejected-by-store", str(poisoned))
    labels = {"reason": "rejected-by-store"}
    assert registry.get_sample_value("mowdeck_notifications_states_ignored_total", labels) == 1
    assert supervisor.get(str(poisoned)) is None  # restarts from its stored watch

    # The mower's next clean state goes through.
    later = delivered(poisoned, 20)
    assert await settled(states, [later]) == ["ack"]
