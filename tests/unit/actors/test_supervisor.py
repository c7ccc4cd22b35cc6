"""ShardSupervisor: start by key, restart from snapshot with backoff, give up, ordered stop."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pykka
import pytest
import structlog
from prometheus_client import CollectorRegistry

from actors import (
    ActorMetrics,
    Dispatcher,
    DispatcherActor,
    GaveUpError,
    InMemorySnapshotStore,
    LoopBridge,
    ShardSupervisor,
    Snapshot,
    SupervisorClosedError,
)


class Counter(DispatcherActor):
    """Counts messages; its snapshot is the count, as of the last counted sequence."""

    def __init__(
        self,
        *,
        dispatcher: Dispatcher,
        key: str,
        count: int,
        fail_on_start: bool,
        stops: list[str],
        counts_at_stop: dict[str, int] | None = None,
    ) -> None:
        super().__init__(dispatcher=dispatcher)
        self.key = key
        self.count = count
        self.fail_on_start = fail_on_start
        self.stops = stops
        self.counts_at_stop = {} if counts_at_stop is None else counts_at_stop

    def on_start(self) -> None:
        if self.fail_on_start:
            raise RuntimeError(f"{self.key} cannot start")

    def on_stop(self) -> None:
        self.stops.append(self.key)
        self.counts_at_stop[self.key] = self.count

    def on_receive(self, message: Any) -> Any:
        match message:
            case "inc":
                self.count += 1
            case "crash":
                raise ValueError(f"{self.key} crashed")
            case "snapshot":
                return Snapshot(self.key, str(self.count).encode(), self.count)
        return self.count


class Harness:
    def __init__(self, dispatcher: Dispatcher, registry: CollectorRegistry) -> None:
        self.dispatcher = dispatcher
        self.registry = registry
        self.store = InMemorySnapshotStore()
        self.starts: list[tuple[str, Snapshot | None, float]] = []
        self.failing: set[str] = set()
        self.stops: list[str] = []
        self.counts_at_stop: dict[str, int] = {}
        self.now = 0.0

    def factory(self, key: str, snapshot: Snapshot | None) -> pykka.ActorRef[Any]:
        self.starts.append((key, snapshot, time.monotonic()))
        count = int(snapshot.state) if snapshot else 0
        return Counter.start(
            dispatcher=self.dispatcher,
            key=key,
            count=count,
            fail_on_start=key in self.failing,
            stops=self.stops,
            counts_at_stop=self.counts_at_stop,
        )

    def supervisor(self, **kwargs: Any) -> ShardSupervisor:
        options: dict[str, Any] = {
            "backoff_initial": 0.01,
            "backoff_max": 1.0,
            "max_restarts": 3,
            "window_seconds": 60.0,
            "metrics": ActorMetrics(self.registry),
        }
        options.update(kwargs)
        return ShardSupervisor(self.dispatcher, self.factory, self.store, **options)

    def metric(self, name: str) -> float:
        return self.registry.get_sample_value(name, {"actor": "Counter"}) or 0.0


class GatedStore(InMemorySnapshotStore):
    """Loads nothing until ``release`` is set."""

    def __init__(self, release: asyncio.Event) -> None:
        super().__init__()
        self._release = release

    async def load(self, key: str) -> Snapshot | None:
        await self._release.wait()
        return None


@pytest.fixture
async def harness(registry: CollectorRegistry) -> AsyncIterator[Harness]:
    dispatcher = Dispatcher(workers=2, name="sup")
    dispatcher.start()
    yield Harness(dispatcher, registry)
    assert await asyncio.to_thread(dispatcher.stop, 5)


async def test_get_or_start_starts_once_per_key(harness: Harness) -> None:
    supervisor = harness.supervisor()
    first, again, *concurrent = await asyncio.gather(
        *(supervisor.get_or_start("m1") for _ in range(5))
    )
    assert first is again
    assert all(ref is first for ref in concurrent)
    assert [key for key, _, _ in harness.starts] == ["m1"]
    assert supervisor.get("m1") is first
    assert supervisor.get("m2") is None
    assert supervisor.keys() == ["m1"]
    assert len(supervisor) == 1
    assert "m1" in supervisor
    await supervisor.stop_all()


async def test_restart_from_the_last_snapshot(harness: Harness) -> None:
    supervisor = harness.supervisor()
    bridge = LoopBridge(asyncio.get_running_loop())
    ref = await supervisor.get_or_start("m1")
    for _ in range(3):
        ref.tell("inc")
    await harness.store.save(await bridge.ask(ref, "snapshot"))  # the service persists it
    ref.tell("inc")  # counted, but never snapshotted: lost in the crash
    ref.tell("crash")
    await bridge.wait_stopped(ref)
    restarted = await supervisor.get_or_start("m1")
    assert restarted is not ref
    assert await bridge.ask(restarted, "get") == 3
    assert harness.starts[-1][1] == Snapshot("m1", b"3", 3)
    assert harness.metric("mowdeck_actor_restarts_total") == 1
    assert harness.metric("mowdeck_actor_failures_total") == 1
    await supervisor.stop_all()


async def test_restart_backoff_doubles(harness: Harness) -> None:
    supervisor = harness.supervisor(backoff_initial=0.02, max_restarts=10)
    bridge = LoopBridge(asyncio.get_running_loop())
    for _ in range(4):
        ref = await supervisor.get_or_start("m1")
        ref.tell("crash")
        await bridge.wait_stopped(ref)
    await supervisor.get_or_start("m1")
    times = [at for _, _, at in harness.starts]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    for attempt, gap in enumerate(gaps):
        assert gap >= 0.02 * 2**attempt * 0.9, gaps
    await supervisor.stop_all()


async def test_gives_up_on_an_actor_that_keeps_failing(harness: Harness) -> None:
    supervisor = harness.supervisor(max_restarts=2)
    bridge = LoopBridge(asyncio.get_running_loop())
    healthy = await supervisor.get_or_start("healthy")
    healthy.tell("inc")
    harness.failing.add("broken")
    with structlog.testing.capture_logs() as logs, pytest.raises(GaveUpError):
        await supervisor.get_or_start("broken")
    assert [key for key, _, _ in harness.starts].count("broken") == 3  # start + 2 restarts
    assert supervisor.given_up() == {"broken"}
    assert supervisor.keys() == ["healthy"]
    assert [entry["actor_key"] for entry in logs if entry["event"] == "actors.gave_up"] == [
        "broken"
    ]
    assert harness.metric("mowdeck_actor_give_ups_total") == 1
    # The others never noticed.
    assert supervisor.get("healthy") is healthy
    assert await bridge.ask(healthy, "get") == 1
    with pytest.raises(GaveUpError):
        await supervisor.get_or_start("broken")
    # An operator's stop() clears the mark; the next start is a fresh one.
    harness.failing.clear()
    await supervisor.stop("broken")
    assert (await supervisor.get_or_start("broken")).is_alive()
    await supervisor.stop_all()


async def test_the_owner_hears_of_every_failure_and_of_the_give_up(harness: Harness) -> None:
    heard: list[tuple[str, str, bool]] = []
    supervisor = harness.supervisor(
        max_restarts=2,
        on_failure=lambda key, error, gave_up: heard.append((key, repr(error), gave_up)),
    )
    harness.failing.add("broken")
    with pytest.raises(GaveUpError):
        await supervisor.get_or_start("broken")
    assert [(key, gave_up) for key, _, gave_up in heard] == [
        ("broken", False),
        ("broken", False),
        ("broken", True),
    ]
    await supervisor.stop_all()


async def test_failures_spread_beyond_the_window_never_give_up(harness: Harness) -> None:
    clock = [0.0]
    supervisor = harness.supervisor(max_restarts=1, window_seconds=10.0, clock=lambda: clock[0])
    bridge = LoopBridge(asyncio.get_running_loop())
    for _ in range(5):
        ref = await supervisor.get_or_start("m1")
        ref.tell("crash")
        await bridge.wait_stopped(ref)
        clock[0] += 11.0
    assert (await supervisor.get_or_start("m1")).is_alive()
    assert supervisor.given_up() == frozenset()
    assert harness.metric("mowdeck_actor_restarts_total") == 5
    await supervisor.stop_all()


async def test_stop_all_stops_in_start_order_after_queued_mail(registry: CollectorRegistry) -> None:
    dispatcher = Dispatcher(workers=1, name="ordered")
    dispatcher.start()
    harness = Harness(dispatcher, registry)
    supervisor = harness.supervisor()
    keys = [f"m{i}" for i in range(20)]
    refs = [await supervisor.get_or_start(key) for key in keys]
    for ref in refs:
        for _ in range(5):
            ref.tell("inc")
    await supervisor.stop_all()
    # The stops are sent in start order; they complete in the order the worker gets to
    # them, which is that order unless the worker is inside an actor's turn when its stop
    # arrives (that actor then stops first). Each handles the mail queued before its stop.
    assert sorted(harness.stops) == sorted(keys)
    assert harness.counts_at_stop == dict.fromkeys(keys, 5)
    assert not any(ref.is_alive() for ref in refs)
    assert len(supervisor) == 0
    with pytest.raises(SupervisorClosedError):
        await supervisor.get_or_start("m1")
    assert await asyncio.to_thread(dispatcher.stop, 5)


async def test_stop_all_cancels_pending_restarts(harness: Harness) -> None:
    supervisor = harness.supervisor(backoff_initial=30.0)
    bridge = LoopBridge(asyncio.get_running_loop())
    ref = await supervisor.get_or_start("m1")
    ref.tell("crash")
    await bridge.wait_stopped(ref)
    await asyncio.sleep(0)
    waiter = asyncio.create_task(supervisor.get_or_start("m1"))
    await asyncio.sleep(0.01)
    assert not waiter.done()  # waiting for the restart
    started = time.monotonic()
    await supervisor.stop_all()
    with pytest.raises(SupervisorClosedError):
        await waiter
    assert time.monotonic() - started < 5
    assert len(harness.starts) == 1


async def test_stop_one_key(harness: Harness) -> None:
    supervisor = harness.supervisor()
    a = await supervisor.get_or_start("a")
    b = await supervisor.get_or_start("b")
    assert await supervisor.stop("a") is True
    assert await supervisor.stop("a") is False
    assert not a.is_alive()
    assert b.is_alive()
    assert supervisor.keys() == ["b"]
    await supervisor.stop_all()


async def test_actor_stopped_elsewhere_is_forgotten_not_restarted(harness: Harness) -> None:
    supervisor = harness.supervisor()
    ref = await supervisor.get_or_start("m1")
    await LoopBridge(asyncio.get_running_loop()).stop(ref)
    await asyncio.sleep(0.01)
    assert "m1" not in supervisor
    again = await supervisor.get_or_start("m1")
    assert again is not ref
    assert harness.metric("mowdeck_actor_restarts_total") == 0
    await supervisor.stop_all()


async def test_first_start_failure_goes_to_the_caller(harness: Harness) -> None:
    class BrokenStore(InMemorySnapshotStore):
        async def load(self, key: str) -> Snapshot | None:
            raise ConnectionError("database down")

    supervisor = ShardSupervisor(harness.dispatcher, harness.factory, BrokenStore())
    with pytest.raises(ConnectionError):
        await supervisor.get_or_start("m1")
    assert "m1" not in supervisor
    await supervisor.stop_all()


async def test_a_first_start_cancelled_while_loading_leaves_the_key_startable(
    harness: Harness,
) -> None:
    release = asyncio.Event()
    supervisor = ShardSupervisor(harness.dispatcher, harness.factory, GatedStore(release))
    first = asyncio.create_task(supervisor.get_or_start("m1"))
    waiter = asyncio.create_task(supervisor.get_or_start("m1"))
    await asyncio.sleep(0.01)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    release.set()
    # The waiter, and any later caller, starts the actor instead of spinning on the
    # cancelled start's finished future (which would hold the loop for good).
    ref = await asyncio.wait_for(waiter, 2)
    assert ref.is_alive()
    assert await asyncio.wait_for(supervisor.get_or_start("m1"), 2) is ref
    await supervisor.stop_all()


async def test_callers_get_the_actor_after_its_on_start(harness: Harness) -> None:
    started_at: list[float] = []
    answered_at: list[float] = []

    class SlowStart(Counter):
        def on_start(self) -> None:
            time.sleep(0.05)
            started_at.append(time.monotonic())

    def factory(key: str, snapshot: Snapshot | None) -> pykka.ActorRef[Any]:
        return SlowStart.start(
            dispatcher=harness.dispatcher, key=key, count=0, fail_on_start=False, stops=[]
        )

    supervisor = ShardSupervisor(harness.dispatcher, factory, harness.store)

    async def call() -> None:
        await supervisor.get_or_start("m1")
        answered_at.append(time.monotonic())

    first = asyncio.create_task(call())
    await asyncio.sleep(0.01)  # the first start is past its snapshot, in on_start
    await asyncio.gather(first, call())
    assert len(started_at) == 1
    assert all(at >= started_at[0] for at in answered_at)
    await supervisor.stop_all()


async def test_factory_must_use_the_supervisors_dispatcher(harness: Harness) -> None:
    other = Dispatcher(workers=1, name="other")
    other.start()

    def factory(key: str, snapshot: Snapshot | None) -> pykka.ActorRef[Any]:
        return Counter.start(dispatcher=other, key=key, count=0, fail_on_start=False, stops=[])

    supervisor = ShardSupervisor(harness.dispatcher, factory, harness.store)
    with pytest.raises(TypeError, match="another dispatcher"):
        await supervisor.get_or_start("m1")
    assert await asyncio.to_thread(other.stop, 5)
    await supervisor.stop_all()


# -- many keys at once ----------------------------------------------------------------


async def test_get_or_start_many_starts_each_new_key_once_after_its_on_start(
    harness: Harness,
) -> None:
    started: list[str] = []

    class Started(Counter):
        def on_start(self) -> None:
            time.sleep(0.001)
            started.append(self.key)

    def factory(key: str, snapshot: Snapshot | None) -> pykka.ActorRef[Any]:
        harness.starts.append((key, snapshot, time.monotonic()))
        return Started.start(
            dispatcher=harness.dispatcher, key=key, count=0, fail_on_start=False, stops=[]
        )

    supervisor = ShardSupervisor(harness.dispatcher, factory, harness.store)
    known = await supervisor.get_or_start("m0")
    keys = ["m0", *(f"m{i}" for i in range(1, 50)), "m1"]  # a running key, a repeat
    refs = await supervisor.get_or_start_many(keys)
    assert refs[0] is known
    assert refs[1] is refs[-1]
    assert all(isinstance(ref, pykka.ActorRef) and ref.is_alive() for ref in refs)
    assert sorted(started) == sorted(f"m{i}" for i in range(50))  # on_start ran before
    assert [key for key, _, _ in harness.starts] == [f"m{i}" for i in range(50)]
    assert supervisor.keys() == [f"m{i}" for i in range(50)]
    # Concurrent single calls find the started actors, not new ones.
    assert await supervisor.get_or_start("m7") is refs[7]
    await supervisor.stop_all()


async def test_get_or_start_many_answers_each_key_for_itself(harness: Harness) -> None:
    harness.failing.add("bad-start")  # on_start raises every time: given up, as one by one
    await harness.store.save(Snapshot("m2", b"41", 41))

    def factory(key: str, snapshot: Snapshot | None) -> pykka.ActorRef[Any]:
        if key == "bad-factory":
            raise ValueError("no such mower")
        return harness.factory(key, snapshot)

    supervisor = ShardSupervisor(
        harness.dispatcher, factory, harness.store, backoff_initial=0.01, max_restarts=1
    )
    refs = await supervisor.get_or_start_many(["m1", "bad-factory", "m2", "bad-start"])
    assert isinstance(refs[1], ValueError)
    assert "bad-factory" not in supervisor
    assert isinstance(refs[3], GaveUpError)
    assert isinstance(refs[0], pykka.ActorRef)
    assert isinstance(refs[2], pykka.ActorRef)
    assert await harness_ask(refs[2], "inc") == 42  # from its snapshot
    await supervisor.stop_all()
    closed = await supervisor.get_or_start_many(["m3"])
    assert isinstance(closed[0], SupervisorClosedError)


async def test_a_cancelled_get_or_start_many_leaves_every_key_startable(
    harness: Harness,
) -> None:
    release = asyncio.Event()
    supervisor = ShardSupervisor(harness.dispatcher, harness.factory, GatedStore(release))
    many = asyncio.create_task(supervisor.get_or_start_many(["m1", "m2"]))
    waiter = asyncio.create_task(supervisor.get_or_start("m2"))
    await asyncio.sleep(0.01)
    many.cancel()
    with pytest.raises(asyncio.CancelledError):
        await many
    release.set()
    ref = await asyncio.wait_for(waiter, 2)
    assert ref.is_alive()
    assert (await asyncio.wait_for(supervisor.get_or_start("m1"), 2)).is_alive()
    await supervisor.stop_all()


async def harness_ask(ref: pykka.ActorRef[Any], message: Any) -> Any:
    return await LoopBridge(asyncio.get_running_loop()).ask(ref, message, timeout=2)


async def test_get_or_start_many_does_not_wait_for_actors_without_an_on_start(
    registry: CollectorRegistry,
) -> None:
    """Nothing of such an actor runs before its first message: the starts are not waited
    for, so they return while the only worker is busy; their mail is handled after."""

    class Plain(DispatcherActor):
        def on_receive(self, message: Any) -> Any:
            return message

    class Gate(DispatcherActor):
        def on_receive(self, message: Any) -> Any:
            return message.wait(5)  # a threading.Event: holds the only worker

    dispatcher = Dispatcher(workers=1, name="plain-starts")
    dispatcher.start()
    supervisor = ShardSupervisor(
        dispatcher,
        lambda _key, _snapshot: Plain.start(dispatcher=dispatcher),
        InMemorySnapshotStore(),
    )
    gate = threading.Event()
    blocker = Gate.start(dispatcher=dispatcher)
    held = blocker.ask(gate, block=False)
    try:
        refs = await asyncio.wait_for(supervisor.get_or_start_many(["p1", "p2", "p3"]), 2)
        assert all(isinstance(ref, pykka.ActorRef) for ref in refs)
        answer = refs[0].ask("after the start", block=False)
        with pytest.raises(pykka.Timeout):  # the worker is still held: nothing has run yet
            answer.get(timeout=0.05)
    finally:
        gate.set()
    assert held.get(timeout=5) is True
    assert answer.get(timeout=5) == "after the start"
    await supervisor.stop_all()
    blocker.stop()
    assert await asyncio.to_thread(dispatcher.stop, 5)
