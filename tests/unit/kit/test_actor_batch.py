"""The kit's actor batch: each failure's answer, decided once for every service."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pykka
import pytest
import structlog
from prometheus_client import CollectorRegistry

from actors import (
    AnswerSink,
    Dispatcher,
    DispatcherActor,
    LoopBridge,
    PrefetchedSnapshots,
    ShardSupervisor,
    Snapshot,
)
from contracts.v1 import MowerState, encode
from contracts.v1.subjects import telemetry_subject
from mowdeck.kit.actor_batch import ActorBatch, ActorBatchMetrics, Committed
from mowdeck.kit.state_batches import MowerStates, SortedStates, StateCheck
from tests.support.fakes import FakeMsg

ACCOUNT = uuid.UUID(int=100)
T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


class Conflict(Exception):
    """Lost a race."""


class Refused(Exception):
    """The store refuses the data."""


@dataclass(frozen=True)
class Count:
    states: Sequence[MowerState]
    sink: AnswerSink[uuid.UUID, int]


@dataclass(frozen=True)
class Set:
    value: int


class Counter(DispatcherActor):
    """Counts the states it was asked about; answers the count before them."""

    def __init__(self, *, dispatcher: Dispatcher, mower_id: uuid.UUID) -> None:
        super().__init__(dispatcher=dispatcher)
        self.mower_id = mower_id
        self.count = 0

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, Count):
            if any(s.error_code == "crash" for s in message.states):
                message.sink.deliver(self.mower_id, None)
                return None
            message.sink.deliver(self.mower_id, self.count)
            self.count += len(message.states)
            return None
        if isinstance(message, Set):
            self.count = message.value
            return None
        return super().on_receive(message)


@dataclass
class Script:
    """How the test's store answers: conflicts to raise, mowers it refuses, a failure."""

    conflicts: int = 0
    refuse: set[uuid.UUID] = field(default_factory=set)
    fail: bool = False
    drop: dict[uuid.UUID, dict[int, str]] = field(default_factory=dict)
    adopt: dict[uuid.UUID, object] = field(default_factory=dict)
    transactions: list[list[uuid.UUID]] = field(default_factory=list)


class TallyBatch(ActorBatch[int, datetime, list[uuid.UUID]]):
    """A service's steps for the test: counts what the actor batch tells it."""

    def __init__(self, script: Script, **kw: Any) -> None:
        super().__init__(conflict=Conflict, refused=Refused, **kw)
        self.script = script
        self.seen: list[SortedStates] = []
        self.forgotten: list[uuid.UUID] = []
        self.commits: list[tuple[int, list[uuid.UUID]]] = []
        self.drops: list[tuple[str, uuid.UUID]] = []

    def context(self) -> datetime:
        return T0

    def check(self, context: datetime) -> StateCheck:
        def check(state: MowerState, data: bytes) -> tuple[str, str] | None:
            del data
            return ("too-old", "before the context") if state.observed_at < context else None

        return check

    def sorted(self, batch: SortedStates) -> None:
        self.seen.append(batch)

    def question(
        self, entry: MowerStates, sink: AnswerSink[uuid.UUID, int], context: datetime
    ) -> Count:
        del context
        return Count(entry.states, sink)

    async def write(
        self,
        mowers: Mapping[uuid.UUID, MowerStates],
        answers: Mapping[uuid.UUID, int],
        context: datetime,
    ) -> Committed[list[uuid.UUID]]:
        del answers, context
        s = self.script
        s.transactions.append(list(mowers))
        if s.fail:
            raise RuntimeError("the database went away")
        if s.conflicts:
            s.conflicts -= 1
            raise Conflict("deadlock detected")
        if s.refuse & set(mowers):
            raise Refused("invalid byte sequence")
        return Committed(
            list(mowers),
            adopt={m: v for m, v in s.adopt.items() if m in mowers},
            drops={m: d for m, d in s.drop.items() if m in mowers},
        )

    def adopt(self, memory: object) -> Set:
        assert isinstance(memory, int)
        return Set(memory)

    def forget(self, mower_ids: Sequence[uuid.UUID]) -> None:
        self.forgotten.extend(mower_ids)

    def committed(self, committed: Committed[list[uuid.UUID]], states: int, seconds: float) -> None:
        assert seconds >= 0
        self.commits.append((states, committed.result))

    def dropped(self, reason: str, state: MowerState) -> None:
        self.drops.append((reason, state.mower_id))


@dataclass
class Rig:
    batch: TallyBatch
    script: Script
    supervisor: ShardSupervisor
    registry: CollectorRegistry

    def metric(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(f"mowdeck_test_actor_batch_{name}", labels) or 0.0

    def count_of(self, mower: uuid.UUID) -> int:
        ref = self.supervisor.get(str(mower))
        assert ref is not None
        actor: Counter = ref.proxy().count.get(timeout=5)  # type: ignore[assignment]
        return actor  # type: ignore[return-value]


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    dispatcher = Dispatcher(workers=1, name="actor-batch-test")
    dispatcher.start()

    async def read(keys: Sequence[str]) -> dict[str, Snapshot]:
        del keys
        return {}

    snapshots = PrefetchedSnapshots(read)

    def factory(key: str, snapshot: Snapshot | None) -> pykka.ActorRef[Any]:
        del snapshot
        return Counter.start(dispatcher=dispatcher, mower_id=uuid.UUID(key))

    supervisor = ShardSupervisor(dispatcher, factory, snapshots)
    registry = CollectorRegistry()
    script = Script()
    batch = TallyBatch(
        script,
        name="test",
        supervisor=supervisor,
        bridge=LoopBridge(asyncio.get_running_loop()),
        snapshots=snapshots,
        metrics=ActorBatchMetrics(registry, service="test"),
        batch_max=100,
        linger=0,
    )
    yield Rig(batch, script, supervisor, registry)
    await supervisor.stop_all()
    await asyncio.to_thread(dispatcher.stop)


def msg(mower: int, second: int = 0, **fields: Any) -> FakeMsg:
    mower_id = uuid.UUID(int=mower)
    state = MowerState(
        mower_id=mower_id,
        account_id=ACCOUNT,
        observed_at=T0.replace(second=second),
        activity="mowing",
        battery=50,
        **fields,
    )
    return FakeMsg(encode(state), telemetry_subject(mower_id))


def outcomes(*msgs: FakeMsg) -> list[str | None]:
    return [m.outcome for m in msgs]


async def test_a_batch_commits_once_then_every_delivery_is_acknowledged(rig: Rig) -> None:
    a1, a2, b1 = msg(1), msg(1, 1), msg(2)
    assert await rig.batch.process([a1, a2, b1]) == [[uuid.UUID(int=1), uuid.UUID(int=2)]]
    assert outcomes(a1, a2, b1) == ["ack"] * 3
    assert rig.batch.commits == [(3, [uuid.UUID(int=1), uuid.UUID(int=2)])]
    assert rig.count_of(uuid.UUID(int=1)) == 2


async def test_what_is_no_state_is_terminated_or_acknowledged_unread(rig: Rig) -> None:
    old = msg(1)
    old_state = MowerState(
        mower_id=uuid.UUID(int=1),
        account_id=ACCOUNT,
        observed_at=T0.replace(year=2025),
        activity="idle",
        battery=1,
    )
    old = FakeMsg(encode(old_state), telemetry_subject(old_state.mower_id))
    junk = FakeMsg(b"{not json", telemetry_subject(uuid.UUID(int=2)))
    foreign = FakeMsg(b"{}", "telemetry.gateway.heartbeat")
    good = msg(3)
    with structlog.testing.capture_logs() as logs:
        await rig.batch.process([old, junk, foreign, good])
    assert outcomes(old, junk, foreign, good) == ["term", "term", "ack", "ack"]
    [seen] = rig.batch.seen
    assert sorted(r.reason for r in seen.rejected) == ["malformed", "too-old"]
    terminated = [e for e in logs if e["event"] == "state terminated"]
    assert sorted(e["reason"] for e in terminated) == ["malformed", "too-old"]


async def test_a_lost_race_is_tried_again_and_then_commits(rig: Rig) -> None:
    rig.script.conflicts = 2
    m = msg(1)
    await rig.batch.process([m])
    assert m.outcome == "ack"
    assert len(rig.script.transactions) == 3
    assert rig.metric("redelivered_total", reason="failed") == 0


async def test_a_race_lost_three_times_redelivers_the_batch_and_restarts_its_actors(
    rig: Rig,
) -> None:
    rig.script.conflicts = 3
    a, b = msg(1), msg(2)
    await rig.batch.process([a, b])
    assert outcomes(a, b) == ["nak", "nak"]
    assert len(rig.script.transactions) == 3
    assert rig.supervisor.get("00000000-0000-0000-0000-000000000001") is None
    assert {uuid.UUID(int=1), uuid.UUID(int=2)} <= set(rig.batch.forgotten)
    assert rig.metric("redelivered_total", reason="failed") == 2
    assert rig.batch.commits == []


async def test_a_failed_commit_redelivers_the_batch_and_restarts_its_actors(rig: Rig) -> None:
    rig.script.fail = True
    a, b = msg(1), msg(2, 1)
    with structlog.testing.capture_logs() as logs:
        await rig.batch.process([a, b])
    assert outcomes(a, b) == ["nak", "nak"]
    assert a.nak_delays == [1.0]
    assert all(rig.supervisor.get(str(uuid.UUID(int=i))) is None for i in (1, 2))
    [failed] = [e for e in logs if e["event"] == "batch commit failed; redelivering"]
    assert failed["log_level"] == "error"


async def test_a_mower_the_store_refuses_is_split_off_and_terminated(rig: Rig) -> None:
    mowers = list(range(1, 8))
    refused = uuid.UUID(int=5)
    rig.script.refuse = {refused}
    msgs = {m: [msg(m), msg(m, 1)] for m in mowers}
    committed = await rig.batch.process([x for m in mowers for x in msgs[m]])
    assert {m: outcomes(*msgs[m]) for m in mowers} == {
        m: ["term", "term"] if m == 5 else ["ack", "ack"] for m in mowers
    }
    assert sorted(m for part in committed for m in part) == [
        uuid.UUID(int=m) for m in mowers if m != 5
    ]
    assert rig.script.transactions[0] == [uuid.UUID(int=m) for m in mowers]
    assert [refused] in rig.script.transactions
    assert rig.batch.drops == [("rejected-by-store", refused)] * 2
    assert rig.supervisor.get(str(refused)) is None
    assert rig.metric("splits_total") >= 1


async def test_states_the_transaction_drops_are_terminated_and_the_rest_acknowledged(
    rig: Rig,
) -> None:
    rig.script.drop = {uuid.UUID(int=1): {1: "account-mismatch"}}
    first, second, other = msg(1), msg(1, 1), msg(2)
    with structlog.testing.capture_logs() as logs:
        await rig.batch.process([first, second, other])
    assert outcomes(first, second, other) == ["ack", "term", "ack"]
    assert rig.batch.drops == [("account-mismatch", uuid.UUID(int=1))]
    [dropped] = [e for e in logs if e["event"] == "state dropped"]
    assert (dropped["reason"], dropped["mower_id"]) == ("account-mismatch", str(uuid.UUID(int=1)))


async def test_an_actor_adopts_what_the_transaction_decided(rig: Rig) -> None:
    rig.script.adopt = {uuid.UUID(int=1): 40}
    await rig.batch.process([msg(1)])
    assert rig.count_of(uuid.UUID(int=1)) == 40


async def test_a_mower_whose_actor_gives_no_answer_is_redelivered_alone(rig: Rig) -> None:
    crashing, fine = msg(1, error_code="crash"), msg(2)
    await rig.batch.process([crashing, fine])
    assert outcomes(crashing, fine) == ["nak", "ack"]
    assert rig.script.transactions == [[uuid.UUID(int=2)]]
    assert rig.metric("redelivered_total", reason="no-answer") == 1


class Unsettleable(FakeMsg):
    """A delivery whose connection went away: its term and nak fail."""

    async def term(self) -> None:
        raise ConnectionError("connection closed")

    async def nak(self, delay: float | None = None) -> None:
        raise ConnectionError("connection closed")


async def test_a_settlement_that_fails_is_logged_and_counted_never_swallowed(rig: Rig) -> None:
    junk = Unsettleable(b"{not json", telemetry_subject(uuid.UUID(int=1)))
    rig.script.fail = True
    failing = Unsettleable(encode_state(2), telemetry_subject(uuid.UUID(int=2)))
    with structlog.testing.capture_logs() as logs:
        await rig.batch.process([junk, failing])
    assert rig.metric("unsettled_total") == 2
    assert {e["event"] for e in logs if e["log_level"] == "warning"} >= {
        "term failed; redelivered later",
        "nak failed; redelivered later",
    }


def encode_state(mower: int) -> bytes:
    return encode(
        MowerState(
            mower_id=uuid.UUID(int=mower),
            account_id=ACCOUNT,
            observed_at=T0,
            activity="mowing",
            battery=50,
        )
    )
