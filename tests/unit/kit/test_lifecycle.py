"""Ordered start and stop; a signal during a start that waits stops what had started."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator
from typing import cast

import pytest
from structlog.contextvars import get_contextvars
from structlog.testing import capture_logs

from mowdeck.kit.bus import Bus
from mowdeck.kit.lifecycle import Resources, run_services, start_all, stop_all


class Recorded:
    def __init__(self, name: str, events: list[str], *, hang: bool = False) -> None:
        self.name = name
        self._events = events
        self._hang = hang

    async def start(self) -> None:
        self._events.append(f"start {self.name}")
        if self._hang:
            await asyncio.Event().wait()  # NATS not there yet, say

    async def stop(self) -> None:
        self._events.append(f"stop {self.name}")


async def test_a_signal_during_a_hanging_start_stops_what_had_started_and_the_start() -> None:
    events: list[str] = []
    services = [Recorded("a", events), Recorded("b", events, hang=True)]
    loop = asyncio.get_running_loop()
    loop.call_later(0.1, os.kill, os.getpid(), signal.SIGTERM)
    await asyncio.wait_for(run_services(services), 5)
    # The interrupted start is stopped too: it may already have taken work.
    assert events == ["start a", "start b", "stop b", "stop a"]


async def test_services_stop_in_reverse_order_on_a_signal() -> None:
    events: list[str] = []
    services = [Recorded("a", events), Recorded("b", events)]
    loop = asyncio.get_running_loop()
    loop.call_later(0.1, os.kill, os.getpid(), signal.SIGINT)
    await asyncio.wait_for(run_services(services), 5)
    assert events == ["start a", "start b", "stop b", "stop a"]


class Part:
    """A fake part: its start records itself, or fails."""

    def __init__(self, name: str, events: list[str], *, fails: bool = False) -> None:
        self.name = name
        self._events = events
        self._fails = fails

    async def start(self) -> None:
        if self._fails:
            raise ConnectionError(f"{self.name} is not there")
        self._events.append(f"start {self.name}")

    async def stop(self) -> None:
        self._events.append(f"stop {self.name}")


class HalfStarting:
    """A service that starts three parts, the third of which fails."""

    name = "half"

    def __init__(self, events: list[str]) -> None:
        self.resources = Resources()
        self.parts = [Part("a", events), Part("b", events), Part("c", events, fails=True)]

    async def start(self) -> None:
        for part in self.parts:
            await part.start()
            self.resources.push(part.stop, name=part.name)

    async def stop(self) -> None:
        await self.resources.close()


async def test_a_failed_start_releases_exactly_what_was_started_in_reverse_order() -> None:
    events: list[str] = []
    service = HalfStarting(events)
    with pytest.raises(ConnectionError):
        await start_all([service])
    assert events == ["start a", "start b", "stop b", "stop a"]
    await service.stop()  # a second stop releases nothing twice
    assert events == ["start a", "start b", "stop b", "stop a"]


async def test_a_failing_close_is_logged_and_the_others_still_close() -> None:
    events: list[str] = []
    resources = Resources()

    async def broken() -> None:
        raise OSError("connection reset")

    resources.push_sync(lambda: events.append("closed first"), name="first")
    resources.push(broken, name="broken")
    resources.push(Part("last", events).stop, name="last")
    with capture_logs() as logs:
        await resources.close()
    assert events == ["stop last", "closed first"]
    assert [(e["event"], e["part"]) for e in logs if e["log_level"] == "error"] == [
        ("closing failed", "broken")
    ]


async def test_a_part_that_does_not_close_in_time_is_cancelled_and_the_others_still_close() -> None:
    events: list[str] = []
    resources = Resources(part_timeout=0.2)
    stuck_ended = asyncio.Event()

    async def stuck() -> None:
        try:
            await asyncio.Event().wait()  # a close that waits for something that never comes
        finally:
            stuck_ended.set()

    resources.push_sync(lambda: events.append("closed first"), name="first")
    resources.push(stuck, name="stuck")
    resources.push(Part("quick", events).stop, name="quick", timeout=5.0)
    with capture_logs() as logs:
        await asyncio.wait_for(resources.close(), timeout=10.0)
    assert events == ["stop quick", "closed first"]
    assert stuck_ended.is_set()  # cancelled, not left running
    assert [(e["event"], e["part"]) for e in logs if e["log_level"] == "error"] == [
        ("closing timed out, the rest go on", "stuck")
    ]


async def test_a_cancelled_close_cancels_the_part_it_was_waiting_for() -> None:
    resources = Resources()
    started, ended = asyncio.Event(), asyncio.Event()

    async def slow() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            ended.set()

    resources.push(slow, name="slow")
    closing = asyncio.create_task(resources.close())
    await asyncio.wait_for(started.wait(), timeout=5.0)
    closing.cancel()
    await asyncio.gather(closing, return_exceptions=True)
    assert closing.cancelled()
    await asyncio.wait_for(ended.wait(), timeout=5.0)  # not left running on its own


async def test_an_entered_context_is_exited_at_close_and_borrowed_parts_are_kept() -> None:
    events: list[str] = []

    @contextlib.asynccontextmanager
    async def held() -> AsyncIterator[str]:
        events.append("enter")
        yield "value"
        events.append("exit")

    resources = Resources()
    assert await resources.enter(held()) == "value"
    given = cast("Bus", object())
    assert await resources.bus(given, "nats://nowhere:1", name="x") is given
    await resources.close()
    assert events == ["enter", "exit"]


class Bindings:
    """Any service: notes what is bound while it starts and stops."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.seen: list[tuple[str, dict[str, object]]] = []

    async def start(self) -> None:
        self.seen.append(("start", get_contextvars()))

    async def stop(self) -> None:
        self.seen.append(("stop", get_contextvars()))


async def test_each_service_starts_and_stops_with_its_own_name_bound() -> None:
    simulator, realtime = Bindings("simulator"), Bindings("realtime")
    started = await start_all([simulator, realtime])
    assert get_contextvars() == {}
    await stop_all(started, timeout=5)
    assert simulator.seen == [
        ("start", {"service": "simulator"}),
        ("stop", {"service": "simulator"}),
    ]
    assert realtime.seen == [("start", {"service": "realtime"}), ("stop", {"service": "realtime"})]
