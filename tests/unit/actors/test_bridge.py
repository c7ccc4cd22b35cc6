"""LoopBridge: actors and the event loop talk without the loop ever blocking."""

from __future__ import annotations

import asyncio
import gc
import threading
from typing import Any

import pykka
import pytest
import structlog
import structlog.testing

from actors import Dispatcher, DispatcherActor, LoopBridge
from actors.testing import loop_stall_monitor

from .probes import Crash, DispatcherProbe, Journal, Note, ThreadingProbe, hold


class Effector(DispatcherActor):
    """Hands one effect per message to the loop, as a gateway controller would."""

    def __init__(self, *, dispatcher: Dispatcher, bridge: LoopBridge, sink: list[Any]) -> None:
        super().__init__(dispatcher=dispatcher)
        self.bridge = bridge
        self.sink = sink
        self.total = 0

    def on_receive(self, message: Any) -> Any:
        self.total += sum(range(200))  # a little CPU per message, like a real decision
        self.bridge.call_soon(self.sink.append, (message, threading.current_thread().name))
        return self.total


async def test_ask_answers_without_blocking(dispatcher: Dispatcher) -> None:
    bridge = LoopBridge(asyncio.get_running_loop())
    ref = DispatcherProbe.start(dispatcher=dispatcher, name="p", journal=Journal())
    assert await bridge.ask(ref, Note(7)) == 7
    assert await bridge.wrap(ref.proxy().add(2, 2)) == 4
    await bridge.stop(ref)


async def test_handler_exception_is_raised_in_the_awaiting_task(dispatcher: Dispatcher) -> None:
    bridge = LoopBridge(asyncio.get_running_loop())
    ref = DispatcherProbe.start(dispatcher=dispatcher, name="p", journal=Journal())
    with pytest.raises(ValueError, match="nope"):
        await bridge.ask(ref, Crash("nope"))
    assert ref.is_alive()
    assert await bridge.stop(ref) is True
    with pytest.raises(pykka.ActorDeadError):
        await bridge.ask(ref, Note(1))
    assert await bridge.stop(ref) is False


async def test_ask_timeout(dispatcher: Dispatcher) -> None:
    bridge = LoopBridge(asyncio.get_running_loop())
    ref = DispatcherProbe.start(dispatcher=dispatcher, name="p", journal=Journal())
    release = await asyncio.to_thread(hold, ref)
    with pytest.raises(TimeoutError):
        await bridge.ask(ref, Note(1), timeout=0.05)
    release.set()
    assert await bridge.ask(ref, Note(2), timeout=5) == 2
    await bridge.stop(ref)


async def test_blocking_futures_are_refused() -> None:
    bridge = LoopBridge(asyncio.get_running_loop())
    ref = ThreadingProbe.start(name="t", journal=Journal())
    try:
        with pytest.raises(TypeError, match="without blocking the loop"):
            bridge.wrap(ref.ask(Note(1), block=False))
    finally:
        ref.stop()


async def test_get_hook_futures_are_refused(dispatcher: Dispatcher) -> None:
    bridge = LoopBridge(asyncio.get_running_loop())
    ref = DispatcherProbe.start(dispatcher=dispatcher, name="p", journal=Journal())
    mapped = ref.ask(Note(1), block=False).map(lambda v: v + 1)
    with pytest.raises(TypeError, match="get hook"):
        bridge.wrap(mapped)
    await bridge.stop(ref)


async def test_effects_run_on_the_loop_in_order(dispatcher: Dispatcher) -> None:
    loop = asyncio.get_running_loop()
    bridge = LoopBridge(loop)
    ran_on: list[int] = []
    sink: list[Any] = []
    ref = Effector.start(dispatcher=dispatcher, bridge=bridge, sink=sink)
    for i in range(100):
        ref.tell(i)
    bridge.call_soon(lambda: ran_on.append(threading.get_ident()))
    await bridge.ask(ref, "last")
    await asyncio.sleep(0)  # the last effect was queued just before the answer
    assert [message for message, _ in sink] == [*range(100), "last"]
    assert all(thread.startswith("mowdeck-actors-") for _, thread in sink)
    assert ran_on == [threading.get_ident()]
    await bridge.stop(ref)


async def test_wait_stopped_returns_the_failure(dispatcher: Dispatcher) -> None:
    bridge = LoopBridge(asyncio.get_running_loop())
    ref = DispatcherProbe.start(dispatcher=dispatcher, name="p", journal=Journal())
    ref.tell(Crash("dead"))
    failure = await bridge.wait_stopped(ref)
    assert isinstance(failure, ValueError)
    assert await bridge.wait_stopped(ref) is failure  # again, after the fact


def test_effect_after_the_loop_closed_is_dropped_not_raised() -> None:
    loop = asyncio.new_event_loop()
    bridge = LoopBridge(loop)
    loop.close()
    with structlog.testing.capture_logs() as logs:
        bridge.call_soon(print, "never")
        bridge.call_soon(print, "never either")
    assert [entry["event"] for entry in logs] == ["actors.effect_dropped"] * 2
    assert not bridge._calls


def test_calls_behind_a_drain_the_closed_loop_will_never_run_are_dropped() -> None:
    loop = asyncio.new_event_loop()
    bridge = LoopBridge(loop)
    bridge.call_soon(print, "queued while the loop was open")  # a drain is scheduled
    loop.close()  # ... and never runs
    with structlog.testing.capture_logs() as logs:
        bridge.call_soon(print, "after")
    assert [entry["event"] for entry in logs] == ["actors.effect_dropped"] * 2
    assert not bridge._calls


async def test_calls_from_workers_share_a_wake_up_and_keep_their_order() -> None:
    loop = asyncio.get_running_loop()
    bridge = LoopBridge(loop)
    wakeups = 0
    original = loop.call_soon_threadsafe

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal wakeups
        wakeups += 1
        return original(*args, **kwargs)

    loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
    got: list[tuple[int, int]] = []

    def worker(name: int) -> None:
        for i in range(5000):
            bridge.call_soon(got.append, (name, i))

    try:
        threads = [threading.Thread(target=worker, args=(n,)) for n in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        while len(got) < 10_000:
            await asyncio.sleep(0)
    finally:
        loop.call_soon_threadsafe = original  # type: ignore[method-assign]
    for name in range(2):  # each thread's calls run in the order it made them
        assert [i for n, i in got if n == name] == list(range(5000))
    assert wakeups < 100  # one per drain, not one per call


async def test_a_failing_call_is_reported_and_the_rest_still_run() -> None:
    loop = asyncio.get_running_loop()
    bridge = LoopBridge(loop)
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    ran: list[str] = []
    try:
        threading.Thread(
            target=lambda: (
                bridge.call_soon(ran.append, "before"),
                bridge.call_soon(lambda: 1 / 0),
                bridge.call_soon(ran.append, "after"),
            )
        ).start()
        for _ in range(200):
            if len(ran) == 2:
                break
            await asyncio.sleep(0.005)
    finally:
        loop.set_exception_handler(None)
    assert ran == ["before", "after"]
    assert isinstance(reported[0]["exception"], ZeroDivisionError)


async def test_a_call_raising_a_base_exception_does_not_hold_back_the_rest() -> None:
    loop = asyncio.get_running_loop()
    bridge = LoopBridge(loop)
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))

    def cancelled() -> None:
        raise asyncio.CancelledError

    ran: list[int] = []
    try:
        bridge.call_soon(ran.append, 1)
        bridge.call_soon(cancelled)
        bridge.call_soon(ran.append, 2)
        for _ in range(10):
            await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    assert ran == [1, 2]
    assert isinstance(reported[0]["exception"], asyncio.CancelledError)


async def test_monitor_sees_a_blocking_get_on_the_loop(dispatcher: Dispatcher) -> None:
    # The control for the tests below: awaiting pykka's way stalls the loop, and the
    # monitor notices.
    ref = DispatcherProbe.start(dispatcher=dispatcher, name="p", journal=Journal())
    release = await asyncio.to_thread(hold, ref)
    future = ref.ask(Note(1), block=False)
    threading.Timer(0.15, release.set).start()
    async with loop_stall_monitor() as report:
        assert future.get(timeout=5) == 1  # blocks the loop until the timer fires
    assert report.max_stall >= 0.1
    ref.stop()


async def test_bridge_ask_does_not_stall_the_loop(dispatcher: Dispatcher) -> None:
    bridge = LoopBridge(asyncio.get_running_loop())
    ref = DispatcherProbe.start(dispatcher=dispatcher, name="p", journal=Journal())
    release = await asyncio.to_thread(hold, ref)
    threading.Timer(0.15, release.set).start()
    async with loop_stall_monitor() as report:
        assert await bridge.ask(ref, Note(1), timeout=5) == 1
    assert report.ticks > 20  # the loop kept running while it waited
    assert report.max_stall < 0.05
    await bridge.stop(ref)


async def test_loop_keeps_running_while_many_actors_work(dispatcher: Dispatcher) -> None:
    bridge = LoopBridge(asyncio.get_running_loop())
    sink: list[Any] = []
    refs = [Effector.start(dispatcher=dispatcher, bridge=bridge, sink=sink) for _ in range(500)]
    # A full collection of what earlier tests left behind is a stall of its own (tens of
    # ms in a long suite), not the bridge's: start from a collected heap.
    gc.collect()
    async with loop_stall_monitor() as report:
        for round_ in range(20):
            for ref in refs:
                ref.tell(round_)
            answers = await asyncio.gather(*(bridge.ask(ref, "sync") for ref in refs[::10]))
            assert len(answers) == 50
            await asyncio.sleep(0)
    await asyncio.gather(*(bridge.ask(ref, "end") for ref in refs))
    await asyncio.sleep(0)
    assert len(sink) == 500 * 20 + 50 * 20 + 500
    # Generous: the loop shares the GIL with two busy workers (5 ms switch interval) and,
    # on a 2-core machine running other suites, waits for a core (60 ms seen). A loop that
    # blocked on an actor's answer would stall for a whole round of 500 actors' work.
    assert report.max_stall < 0.1, report
    await asyncio.gather(*(bridge.stop(ref) for ref in refs))
