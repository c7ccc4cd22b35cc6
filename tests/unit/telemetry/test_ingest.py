"""The ingest pipeline: batch N+1 is decided while N commits, and never writes a wrong row.

Also what the pipeline does with states the store cannot keep: terminated at decode time
when they hold a NUL character, and a mower the store still refuses is split off its batch.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest
import structlog
from prometheus_client import CollectorRegistry

from actors import Dispatcher, LoopBridge, ShardSupervisor
from contracts.v1 import MowerState, encode
from contracts.v1.subjects import telemetry_subject
from mowdeck.kit.logging import ids_as_text
from mowdeck.telemetry import postgres
from mowdeck.telemetry.actor import LatestRowSnapshots, actor_factory
from mowdeck.telemetry.errors import StoreConflictError, StoreError, StoreRejectedError
from mowdeck.telemetry.fingerprint import Rules
from mowdeck.telemetry.ingest import StateBatcher
from mowdeck.telemetry.memory import InMemoryTelemetryStore
from mowdeck.telemetry.metrics import TelemetryMetrics
from mowdeck.telemetry.ports import StateWriter, WriteBatch, WriteCounts
from tests.support.fakes import FakeMsg
from tests.unit.telemetry.samples import ACCOUNT, MOWER, T0, at, state

pytestmark = pytest.mark.timeout(10)


def delivered(s: MowerState) -> FakeMsg:
    """``s`` as the batcher gets it from the stream."""
    return FakeMsg(encode(s), telemetry_subject(s.mower_id))


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
    msg = delivered(s)
    batcher.take(msg)  # type: ignore[arg-type]
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
    assert not first.settled
    assert not second.settled
    store.release.set()
    await second.wait_settled()
    await first.wait_settled()
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
    await third.wait_settled()
    await fourth.wait_settled()
    assert (third.outcome, fourth.outcome) == ("ack", "ack")
    latest = await store.latest(ACCOUNT, MOWER)
    assert latest is not None
    assert latest.observed_at == at(20)
    history = await store.history(ACCOUNT, MOWER, T0, at(60), 10)
    assert [row.observed_at for row in history] == [at(10)]


async def test_a_late_older_change_does_not_leave_the_history_on_a_value_the_mower_left(
    pipeline: tuple[ObservedBatcher, GatedStore],
) -> None:
    # A replica's batch failed (PostgreSQL restarting) and was given back; another stored
    # the states after it meanwhile. The change comes late: the mower was at 10 % at 10 s
    # and back on its charger's 80 % at 20 s, which the history had skipped as unchanged.
    batcher, store = pipeline
    store.release.set()
    failed = await _send(batcher, state(0))  # the gated store's first commit fails
    await failed.wait_settled()
    assert failed.outcome == "nak"
    for s in (state(0), state(20)):
        msg = await _send(batcher, s)
        await msg.wait_settled()
        assert msg.outcome == "ack"
    history = await store.history(ACCOUNT, MOWER, T0, at(60), 10)
    assert [row.observed_at for row in history] == [at(0)]  # 20 s: unchanged, skipped
    late = await _send(batcher, state(10, battery=10))
    await late.wait_settled()
    assert late.outcome == "ack"
    history = await store.history(ACCOUNT, MOWER, T0, at(60), 10)
    assert [(row.observed_at, row.battery) for row in history] == [
        (at(0), 80),
        (at(10), 10),
        (at(20), 80),
    ]
    # The actor's memory and the stored row agree: the next heartbeat writes no history.
    nxt = await _send(batcher, state(30))
    await nxt.wait_settled()
    history = await store.history(ACCOUNT, MOWER, T0, at(60), 10)
    assert [row.observed_at for row in history] == [at(0), at(10), at(20)]
    memory = (await store.memories([MOWER]))[MOWER]
    assert (memory.observed_at, memory.history_at) == (at(30), at(20))


# -- states the store cannot keep ---------------------------------------------------------

REFUSED = "refused"  # an error code RefusingStore refuses, as PostgreSQL refuses a NUL


class RefusingWriter:
    """Refuses a batch holding a state with ``error_code=REFUSED``, writing nothing of it."""

    def __init__(self, tx: StateWriter, store: RefusingStore) -> None:
        self._tx = tx
        self._store = store

    async def lock(self, mower_ids: Sequence[uuid.UUID]) -> Any:
        self._store.transactions.append(sorted(mower_ids))
        return await self._tx.lock(mower_ids)

    async def write(self, batch: WriteBatch) -> WriteCounts:
        states = [*(s for s, _ in batch.latest), *batch.history, *batch.positions]
        if any(s.error_code == REFUSED for s in states):
            raise StoreRejectedError("invalid byte sequence for encoding UTF8: 0x00")
        return await self._tx.write(batch)


class RefusingStore(InMemoryTelemetryStore):
    """The in-memory store refusing some data, and remembering each transaction's mowers."""

    def __init__(self) -> None:
        super().__init__()
        self.transactions: list[list[uuid.UUID]] = []

    @asynccontextmanager
    async def state_writer(self) -> AsyncIterator[Any]:
        async with super().state_writer() as tx:
            yield RefusingWriter(tx, self)


@dataclass
class Rig:
    """A batcher driven through ``process`` (no batching task) and what it works with."""

    batcher: StateBatcher
    store: RefusingStore
    supervisor: ShardSupervisor
    registry: CollectorRegistry

    async def process(self, *msgs: FakeMsg) -> WriteCounts:
        return await self.batcher.process(msgs)  # type: ignore[arg-type]

    def dropped(self, reason: str) -> float:
        labels = {"reason": reason}
        return self.registry.get_sample_value("mowdeck_telemetry_dropped_total", labels) or 0.0


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    store = RefusingStore()
    rules = Rules()
    registry = CollectorRegistry()
    dispatcher = Dispatcher(workers=1, name="refusal-test")
    dispatcher.start()
    snapshots = LatestRowSnapshots(store)
    supervisor = ShardSupervisor(dispatcher, actor_factory(dispatcher, rules), snapshots)
    batcher = StateBatcher(
        store,
        supervisor=supervisor,
        snapshots=snapshots,
        bridge=LoopBridge(asyncio.get_running_loop()),
        rules=rules,
        metrics=TelemetryMetrics(registry),
        batch_max=100,
        linger=0,
    )
    yield Rig(batcher, store, supervisor, registry)
    await supervisor.stop_all()
    await asyncio.to_thread(dispatcher.stop)


@pytest.mark.parametrize(
    "fields",
    [
        {"error_code": "E\x001"},
        {"rtk_source": "\x00"},
        {"connection": "wifi\x00"},
        {"raw": {"fw": "1.2\x00"}},
        {"raw": {"f\x00w": "1.2"}},
        {"raw": {"log": [{"line": "ok"}, {"line": "\x00"}]}},
    ],
    ids=["error-code", "rtk-source", "connection", "raw-value", "raw-key", "raw-nested"],
)
async def test_a_nul_character_is_terminated_at_decode_time(
    rig: Rig, fields: dict[str, Any]
) -> None:
    other = uuid.UUID(int=2)
    poisoned, clean = delivered(state(0, **fields)), delivered(state(0, mower_id=other))
    assert b"\\u0000" in poisoned.data  # JSON carries it as an escape
    with structlog.testing.capture_logs() as logs:
        await rig.process(poisoned, clean)
    assert (poisoned.outcome, clean.outcome) == ("term", "ack")
    assert await rig.store.latest(ACCOUNT, MOWER) is None
    assert await rig.store.latest(ACCOUNT, other) is not None
    assert rig.dropped("malformed") == 1
    [entry] = [e for e in logs if e["event"] == "state terminated"]
    field = next(iter(fields))
    assert entry["reason"] == "malformed"
    assert field in entry["error"]
    assert "NUL" in entry["error"]


async def test_the_text_of_an_escape_is_no_nul_character(rig: Rig) -> None:
    s = state(0, error_code="\\u0000", raw={"note": "\\u0000"})  # a backslash, not a NUL
    msg = delivered(s)
    await rig.process(msg)
    assert msg.outcome == "ack"
    assert await rig.store.latest(ACCOUNT, MOWER) == s


async def test_a_mower_the_store_refuses_is_split_off_and_terminated(rig: Rig) -> None:
    store, supervisor = rig.store, rig.supervisor
    mowers = [uuid.UUID(int=i) for i in range(1, 8)]
    refused = mowers[4]
    msgs = {
        m: [
            delivered(state(0, mower_id=m)),
            delivered(state(10, mower_id=m, error_code=REFUSED if m == refused else None)),
        ]
        for m in mowers
    }
    bound = [structlog.contextvars.merge_contextvars, ids_as_text]
    with structlog.testing.capture_logs(processors=bound) as logs:
        counts = await rig.process(*(msg for m in mowers for msg in msgs[m]))
    assert {m: [msg.outcome for msg in msgs[m]] for m in mowers} == {
        m: ["term", "term"] if m == refused else ["ack", "ack"] for m in mowers
    }
    assert counts.latest == len(mowers) - 1
    stored = await store.latest_of_account(ACCOUNT, None)
    assert [s.mower_id for s in stored] == [m for m in mowers if m != refused]
    assert store.transactions[0] == mowers  # the whole batch first
    assert [refused] in store.transactions  # then the mower alone
    assert rig.dropped("rejected-by-store") == 2
    [entry] = [e for e in logs if e["event"] == "states terminated"]
    assert (entry["reason"], entry["mower_id"], entry["states"]) == (
        "rejected-by-store",
        str(refused),
        2,
    )
    assert entry["log_level"] == "warning"
    assert entry["account_id"] == str(ACCOUNT)  # bound while the mower's states are settled
    # Its actor decided against a memory that was never stored: it restarts from the row.
    assert supervisor.get(str(refused)) is None
    assert all(supervisor.get(str(m)) is not None for m in mowers if m != refused)

    # The mower's next clean state is its first: it starts the history.
    later = delivered(state(20, mower_id=refused))
    await rig.process(later)
    assert later.outcome == "ack"
    history = await store.history(ACCOUNT, refused, T0, at(60), 10)
    assert [row.observed_at for row in history] == [at(20)]


async def test_a_transient_failure_while_split_still_redelivers(rig: Rig) -> None:
    store = rig.store
    good, refused = uuid.UUID(int=1), uuid.UUID(int=2)
    original = store.state_writer
    calls = 0

    @asynccontextmanager
    async def flaky() -> AsyncIterator[Any]:
        nonlocal calls
        calls += 1
        if calls == 2:  # the first half after the split: the database went away
            raise StoreError("connection was closed in the middle of operation")
        async with original() as tx:
            yield tx

    store.state_writer = flaky  # type: ignore[method-assign]
    first = delivered(state(0, mower_id=good))
    second = delivered(state(0, mower_id=refused, error_code=REFUSED))
    await rig.process(first, second)
    assert (first.outcome, second.outcome) == ("nak", "term")
    assert rig.dropped("rejected-by-store") == 1
    assert rig.supervisor.get(str(good)) is None


# -- a transaction that loses a race with another replica -------------------------------


class _DeadlockVictim:
    """A transaction that PostgreSQL picks as a deadlock's victim while it locks."""

    def __init__(self, tx: StateWriter) -> None:
        self._tx = tx

    async def lock(self, mower_ids: Sequence[uuid.UUID]) -> Any:
        raise StoreConflictError("ingest batch lost a race: deadlock detected")

    async def write(self, batch: WriteBatch) -> WriteCounts:
        return await self._tx.write(batch)


def _conflicting(store: InMemoryTelemetryStore, failures: int) -> None:
    """The store's next ``failures`` transactions are rolled back as a deadlock's victim."""
    original = store.state_writer
    left = failures

    @asynccontextmanager
    async def writer() -> AsyncIterator[Any]:
        nonlocal left
        async with original() as tx:
            if left:
                left -= 1
                yield _DeadlockVictim(tx)
            else:
                yield tx

    store.state_writer = writer  # type: ignore[method-assign]


async def test_a_batch_that_loses_a_race_is_tried_again_at_once(rig: Rig) -> None:
    first, second = delivered(state(0)), delivered(state(10, mower_id=uuid.UUID(int=2)))
    await rig.process(first)  # the first mower's actor is running
    _conflicting(rig.store, failures=2)
    third = delivered(state(20))
    with structlog.testing.capture_logs() as logs:
        await rig.process(second, third)
    assert (second.outcome, third.outcome) == ("ack", "ack")
    assert [e["attempt"] for e in logs if e["event"] == "batch lost a race; trying again"] == [
        1,
        2,
    ]
    assert (await rig.store.latest(ACCOUNT, MOWER)) == state(20)
    assert rig.supervisor.get(str(MOWER)) is not None  # not restarted: nothing was lost


async def test_a_batch_that_keeps_losing_is_given_back(rig: Rig) -> None:
    _conflicting(rig.store, failures=3)
    msg = delivered(state(0))
    await rig.process(msg)
    assert msg.outcome == "nak"
    assert await rig.store.latest(ACCOUNT, MOWER) is None


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (asyncpg.DeadlockDetectedError("deadlock detected"), StoreConflictError),
        (asyncpg.SerializationError("could not serialize access"), StoreConflictError),
        (asyncpg.CharacterNotInRepertoireError("invalid byte sequence"), StoreRejectedError),
        (asyncpg.ConnectionDoesNotExistError("connection was closed"), StoreError),
    ],
)
def test_the_postgres_errors_a_retry_mends_are_told_apart(
    error: Exception, expected: type[Exception]
) -> None:
    with pytest.raises(expected) as raised, postgres._translated("ingest batch"):
        raise error
    assert type(raised.value) is expected


async def test_a_state_from_the_future_is_terminated_and_holds_nothing_off(rig: Rig) -> None:
    # A mower whose clock runs a year ahead: its state would make every later one look
    # older to the latest row's guard. A few seconds ahead is a clock's ordinary skew.
    now = datetime.now(UTC)
    ahead = delivered(state((now - T0).total_seconds() + 365 * 86400))
    slightly = delivered(state((now - T0).total_seconds() + 10, mower_id=uuid.UUID(int=2)))
    with structlog.testing.capture_logs() as logs:
        await rig.process(ahead, slightly)
    assert (ahead.outcome, slightly.outcome) == ("term", "ack")
    assert rig.dropped("from-the-future") == 1
    [entry] = [e for e in logs if e["event"] == "state terminated"]
    assert entry["reason"] == "from-the-future"
    honest = delivered(state((now - T0).total_seconds()))
    await rig.process(honest)
    assert honest.outcome == "ack"
    assert await rig.store.latest(ACCOUNT, MOWER) == state((now - T0).total_seconds())
