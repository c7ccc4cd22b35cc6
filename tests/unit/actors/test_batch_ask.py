"""BatchAsk, AnswerSink and PrefetchedSnapshots: one question per actor, answers on the loop."""

from __future__ import annotations

import asyncio
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pykka
import pytest
import structlog

from actors import (
    AnswerSink,
    BatchAsk,
    Dispatcher,
    DispatcherActor,
    LoopBridge,
    PrefetchedSnapshots,
    ShardSupervisor,
    Snapshot,
    snapshots_by_id,
)


@dataclass(frozen=True)
class Add:
    """Add ``numbers`` to the running total and answer the new total."""

    numbers: Sequence[int]
    sink: AnswerSink[str, int]


class Summer(DispatcherActor):
    """Keeps a running total that starts from its snapshot."""

    def __init__(self, *, dispatcher: Dispatcher, key: str, total: int) -> None:
        super().__init__(dispatcher=dispatcher)
        self.key = key
        self.total = total

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, Add):
            if self.key.startswith("silent"):
                return None  # never answers
            if self.key.startswith("broken"):
                message.sink.deliver(self.key, None)
                raise ValueError(f"{self.key} cannot add")
            self.total += sum(message.numbers)
            message.sink.deliver(self.key, self.total)
            return None
        return super().on_receive(message)


class Store:
    """Snapshots by key, counting the reads."""

    def __init__(self, totals: Mapping[str, int]) -> None:
        self.totals = dict(totals)
        self.reads: list[list[str]] = []

    async def read(self, keys: Sequence[str]) -> dict[str, Snapshot]:
        self.reads.append(list(keys))
        return {k: Snapshot(k, str(self.totals[k]).encode(), 0) for k in keys if k in self.totals}


class Harness:
    def __init__(self, dispatcher: Dispatcher, totals: Mapping[str, int]) -> None:
        self.dispatcher = dispatcher
        self.store = Store(totals)
        self.snapshots = PrefetchedSnapshots(self.store.read)
        self.supervisor = ShardSupervisor(dispatcher, self.factory, self.snapshots, max_restarts=0)
        self.bridge = LoopBridge(asyncio.get_running_loop())
        self.starting: list[tuple[list[str], int]] = []  # keys, and the reads done before
        self.started: list[list[str]] = []

    def factory(self, key: str, snapshot: Snapshot | None) -> pykka.ActorRef[Any]:
        if key.startswith("unstartable"):
            raise RuntimeError(f"{key} cannot start")
        total = 0 if snapshot is None else int(snapshot.state)
        return Summer.start(dispatcher=self.dispatcher, key=key, total=total)

    def asker(self, timeout: float = 10.0) -> BatchAsk[str, int]:
        return BatchAsk(
            self.supervisor,
            self.bridge,
            key=lambda k: k,
            snapshots=self.snapshots,
            timeout=timeout,
            on_starting=lambda keys: self.starting.append((keys, len(self.store.reads))),
            on_started=self.started.append,
            name="summers",
        )


def _add(numbers: Sequence[int], sink: AnswerSink[str, int]) -> Add:
    return Add(numbers, sink)


@pytest.fixture
async def harness(dispatcher: Dispatcher) -> AsyncIterator[Harness]:
    harness = Harness(dispatcher, {"m1": 100, "m3": 7})
    yield harness
    await harness.supervisor.stop_all()


async def test_every_actor_answers_and_new_ones_start_from_one_read(harness: Harness) -> None:
    asker = harness.asker()
    items = {f"m{i}": [i, i] for i in range(1, 41)}
    answers = await asker.ask(items, _add)
    expected = {key: 2 * i for i, key in enumerate(items, start=1)}
    expected["m1"] += 100  # from their snapshots
    expected["m3"] += 7
    assert answers == expected
    assert list(answers) == list(items)  # in the order asked
    assert harness.store.reads == [list(items)]  # one read for the forty starts
    assert harness.starting == [(list(items), 0)]  # told before the read
    assert harness.started == [list(items)]
    # Running actors keep their totals; nothing is read or started again.
    again = await asker.ask({"m1": [1], "m2": [1]}, _add)
    assert again == {"m1": 103, "m2": 5}
    assert harness.store.reads == [list(items)]
    assert harness.started == [list(items)]


async def test_a_failing_or_unstartable_actor_answers_none_and_the_others_answer(
    harness: Harness,
) -> None:
    asker = harness.asker()
    with structlog.testing.capture_logs() as logs:
        answers = await asker.ask(
            {"m1": [1], "broken-1": [1], "unstartable-1": [1], "m2": [2]}, _add
        )
    assert answers == {"m1": 101, "broken-1": None, "unstartable-1": None, "m2": 2}
    unavailable = [e for e in logs if e["event"] == "actors.unavailable"]
    assert [(e["actors"], e["key"]) for e in unavailable] == [("summers", "unstartable-1")]


async def test_an_actor_that_does_not_answer_is_none_after_the_timeout(harness: Harness) -> None:
    asker = harness.asker(timeout=0.2)
    with structlog.testing.capture_logs() as logs:
        answers = await asker.ask({"m1": [1], "silent-1": [1]}, _add)
    assert answers == {"m1": 101, "silent-1": None}
    [timeout] = [e for e in logs if e["event"] == "actors.did_not_answer"]
    assert (timeout["actors"], timeout["asked"], timeout["answered"]) == ("summers", 2, 1)


async def test_a_dead_actor_answers_none(harness: Harness) -> None:
    asker = harness.asker()
    await asker.ask({"m1": [1]}, _add)
    ref = harness.supervisor.get("m1")
    assert ref is not None

    class DeadOnTell(BatchAsk[str, int]):
        async def _refs(self, items: Mapping[str, Any]) -> dict[str, pykka.ActorRef[Any]]:
            return {"m1": ref}

    await harness.bridge.stop(ref)
    dead = DeadOnTell(harness.supervisor, harness.bridge, key=lambda k: k, timeout=5.0)
    assert await dead.ask({"m1": [1]}, _add) == {"m1": None}


async def test_sink_resolves_once_the_last_answer_is_in(dispatcher: Dispatcher) -> None:
    bridge = LoopBridge(asyncio.get_running_loop())
    sink: AnswerSink[int, int] = AnswerSink(bridge, 200)
    threads = [
        threading.Thread(target=lambda n=n: [sink.deliver(k, k * 2) for k in range(n, 199, 4)])
        for n in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # 199 of 200 answers are in. A sentinel handed to the loop after them runs after any
    # resolution those answers could have scheduled: ``done`` must still be open then.
    sentinel = bridge.loop.create_future()
    bridge.call_soon(sentinel.set_result, None)
    await sentinel
    assert not sink.done.done()
    assert len(sink.answers) == 199
    await asyncio.to_thread(sink.deliver, 199, None)
    await sink.done
    assert sink.answers[7] == 14
    assert sink.answers[199] is None


async def test_sink_for_nothing_is_done_at_once() -> None:
    sink: AnswerSink[str, int] = AnswerSink(LoopBridge(asyncio.get_running_loop()), 0)
    assert sink.done.done()


async def test_prefetched_snapshots_are_handed_out_once() -> None:
    store = Store({"a": 1, "b": 2})
    snapshots = PrefetchedSnapshots(store.read)
    await snapshots.prefetch(["a", "b", "c"])
    assert store.reads == [["a", "b", "c"]]
    assert await snapshots.load("a") == Snapshot("a", b"1", 0)
    assert await snapshots.load("c") is None  # prefetched as absent: not read again
    assert store.reads == [["a", "b", "c"]]
    store.totals["a"] = 5
    assert await snapshots.load("a") == Snapshot("a", b"5", 0)  # a restart reads afresh
    assert store.reads == [["a", "b", "c"], ["a"]]
    await snapshots.save(Snapshot("a", b"9", 1))  # the pipeline writes it, not the store
    assert await snapshots.load("a") == Snapshot("a", b"5", 0)


async def test_a_save_replaces_a_prefetched_snapshot() -> None:
    store = Store({"a": 1})
    saved: list[Snapshot] = []

    async def save(snapshot: Snapshot) -> None:
        saved.append(snapshot)
        store.totals[snapshot.key] = int(snapshot.state)

    snapshots = PrefetchedSnapshots(store.read, save)
    await snapshots.prefetch(["a"])
    await snapshots.save(Snapshot("a", b"2", 3))
    assert saved == [Snapshot("a", b"2", 3)]
    assert await snapshots.load("a") == Snapshot("a", b"2", 0)  # read again, not the stale copy


async def test_snapshots_by_id_read_rows_in_one_call_keyed_by_the_ids_text() -> None:
    one, two, absent = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    rows = {one: "first", two: "second"}
    calls: list[list[uuid.UUID]] = []

    async def read(ids: list[uuid.UUID]) -> dict[uuid.UUID, str]:
        calls.append(ids)
        return {i: rows[i] for i in ids if i in rows}

    snapshots = snapshots_by_id(read, str.encode)
    found = await snapshots([str(one), str(two), str(absent)])
    assert calls == [[one, two, absent]]
    assert found == {
        str(one): Snapshot(key=str(one), state=b"first", sequence=0),
        str(two): Snapshot(key=str(two), state=b"second", sequence=0),
    }


async def test_sink_resolves_once_with_every_answer_under_thread_switches() -> None:
    # Threads switched as often as the interpreter allows: the count that reaches the
    # expected number is the last answer's, whoever delivers it, and only once.
    bridge = LoopBridge(asyncio.get_running_loop())
    resolutions: list[int] = []
    n, threads_n = 20_000, 8
    sink: AnswerSink[int, int] = AnswerSink(bridge, n)
    real_call_soon = bridge.call_soon

    def counting_call_soon(callback: Any, *args: Any) -> None:
        resolutions.append(len(sink.answers))
        real_call_soon(callback, *args)

    bridge.call_soon = counting_call_soon  # type: ignore[method-assign]
    saved = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [
            threading.Thread(
                target=lambda t=t: [sink.deliver(k, k) for k in range(t, n, threads_n)]
            )
            for t in range(threads_n)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(saved)
    await sink.done
    assert resolutions == [n]  # once, and every answer was in when it was scheduled
    assert len(sink.answers) == n
