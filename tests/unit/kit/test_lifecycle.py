"""Ordered start and stop; a signal during a start that waits stops what had started."""

from __future__ import annotations

import asyncio
import os
import signal

from mowdeck.kit.lifecycle import run_services


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
