"""The ingest pipeline: batch N+1 is decided while N commits, and never writes a wrong row."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from actors import Dispatcher, LoopBridge, ShardSupervisor
from contracts.v1 import MowerState, encode
from contracts.v1.subjects import telemetry_subject
from mowdeck.telemetry.actor import LatestRowSnapshots, actor_factory
from mowdeck.telemetry.errors import StoreError
from mowdeck.telemetry.fingerprint import Rules
from mowdeck.telemetry.ingest import StateBatcher
from mowdeck.telemetry.memory import InMemoryTelemetryStore
from mowdeck.telemetry.metrics import TelemetryMetrics
from tests.unit.telemetry.samples import ACCOUNT, MOWER, T0, at, state

pytestmark = pytest.mark.timeout(10)


class FakeMsg:
    """Just what the batcher touches of a JetStream message."""

    def __init__(self, s: MowerState) -> None:
        self.data = encode(s)
        self.subject = telemetry_subject(s.mower_id)
        self.outcome: str | None = None
        self.settled = asyncio.Event()

    def _settle(self, outcome: str) -> None:
        self.outcome = outcome
        self.settled.set()

    async def ack(self) -> None:
        self._settle("ack")

    async def nak(self, delay: float | None = None) -> None:
        self._settle("nak")

    async def term(self) -> None:
        self._settle("term")


class GatedStore(InMemoryTelemetryStore):
    """The first commit waits for ``release``, then fails."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.commits = 0

    @asynccontextmanager
    async def state_writer(self) -> AsyncIterator[Any]:
        self.commits += 1
        if self.commits == 1:
            await self.release.wait()
            raise StoreError("the database went away")
        async with super().state_writer() as tx:
            yield tx


class ObservedBatcher(StateBatcher):
    """Tells the test when a batch was decided."""

    decided: asyncio.Queue[int]

    async def _prepare(self, msgs: Sequence[Any]) -> Any:
        prepared = await super()._prepare(msgs)
        self.decided.put_nowait(len(msgs))
        return prepared


@pytest.fixture
async def pipeline() -> AsyncIterator[tuple[ObservedBatcher, GatedStore]]:
    store = GatedStore()
    rules = Rules()
    dispatcher = Dispatcher(workers=1, name="pipeline-test")
    dispatcher.start()
    snapshots = LatestRowSnapshots(store)
    supervisor = ShardSupervisor(dispatcher, actor_factory(dispatcher, rules), snapshots)
    batcher = ObservedBatcher(
        store,
        supervisor=supervisor,
        snapshots=snapshots,
        bridge=LoopBridge(asyncio.get_running_loop()),
        rules=rules,
        metrics=TelemetryMetrics(CollectorRegistry()),
        batch_max=100,
        linger=0.001,
    )
    batcher.decided = asyncio.Queue()
    batcher.start()
    yield batcher, store
    store.release.set()
    await batcher.stop()
    await supervisor.stop_all()
    await asyncio.to_thread(dispatcher.stop)


async def _send(batcher: StateBatcher, s: MowerState) -> FakeMsg:
    msg = FakeMsg(s)
    await batcher.on_message(msg)  # type: ignore[arg-type]
    return msg


async def test_a_failed_commit_does_not_leak_into_the_batch_decided_behind_it(
    pipeline: tuple[ObservedBatcher, GatedStore],
) -> None:
    batcher, store = pipeline
    first = await _send(batcher, state(0))
    await batcher.decided.get()
    # Decided while the first batch is still in its transaction: against a memory that
    # says "history written at 0", so this unchanged state alone would write no history.
    second = await _send(batcher, state(10))
    await batcher.decided.get()
    assert not first.settled.is_set()
    assert not second.settled.is_set()
    store.release.set()
    await asyncio.wait_for(second.settled.wait(), 5)
    await asyncio.wait_for(first.settled.wait(), 5)
    assert (first.outcome, second.outcome) == ("nak", "ack")
    # The first state never reached the database, so the second is the mower's first:
    # it must start the history, which its actor had not planned.
    history = await store.history(ACCOUNT, MOWER, T0, at(60), 10)
    assert [row.observed_at for row in history] == [at(10)]
    latest = await store.latest(ACCOUNT, MOWER)
    assert latest is not None
    assert latest.observed_at == at(10)
    memory = (await store.memories([MOWER]))[MOWER]
    assert memory.history_at == at(10)

    # The redelivered first state is older than the stored row: it never moves the latest
    # row, and as it changed nothing it writes nothing either.
    third = await _send(batcher, state(0))
    fourth = await _send(batcher, state(20))
    await asyncio.wait_for(third.settled.wait(), 5)
    await asyncio.wait_for(fourth.settled.wait(), 5)
    assert (third.outcome, fourth.outcome) == ("ack", "ack")
    latest = await store.latest(ACCOUNT, MOWER)
    assert latest is not None
    assert latest.observed_at == at(20)
    history = await store.history(ACCOUNT, MOWER, T0, at(60), 10)
    assert [row.observed_at for row in history] == [at(10)]
