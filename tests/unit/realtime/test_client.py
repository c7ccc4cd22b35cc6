"""A slow client: its writer is held, states conflate, commands all arrive, others go on."""

from __future__ import annotations

import asyncio
import uuid

from prometheus_client import CollectorRegistry

from mowdeck.realtime.buffer import SendBuffer
from mowdeck.realtime.client import Client
from mowdeck.realtime.frames import EVENT_TYPES, Frame
from mowdeck.realtime.metrics import RealtimeMetrics

A, B = uuid.UUID(int=1), uuid.UUID(int=2)


class HeldSink:
    """A transport whose writes wait until released (a client that does not read)."""

    def __init__(self, held: bool) -> None:
        self.written: list[Frame] = []
        self.released = asyncio.Event()
        if not held:
            self.released.set()
        self.closed: str | None = None
        self.writes = 0

    async def write(self, frames: list[Frame]) -> None:
        self.writes += 1
        await self.released.wait()
        self.written.extend(frames)

    async def close(self, reason: str) -> None:
        self.closed = reason


def client(max_events: int = 1000) -> Client:
    return Client(
        user_id="u",
        account_id=uuid.UUID(int=9),
        transport="sse",
        types=EVENT_TYPES,
        requested=None,
        visible={A, B},
        buffer=SendBuffer(max_events=max_events, max_lag=30),
    )


def frame(type_: str, n: int, mower: uuid.UUID) -> Frame:
    return Frame(type_, f"t{n}.c0.e0", b'{"n":%d}' % n, mower, 0.0)  # type: ignore[arg-type]


async def test_a_held_client_gets_the_newest_state_per_mower_and_every_command() -> None:
    metrics = RealtimeMetrics(CollectorRegistry())
    slow, fast = client(), client()
    slow.conflated_metric = metrics.conflated
    slow_sink, fast_sink = HeldSink(held=True), HeldSink(held=False)
    tasks = [
        asyncio.ensure_future(c.run(s, metrics)) for c, s in ((slow, slow_sink), (fast, fast_sink))
    ]
    slow.go_live()
    fast.go_live()
    slow.offer(frame("state", 0, A), 0.0)
    await asyncio.sleep(0)  # the slow writer takes it and is held
    await asyncio.sleep(0)
    for n in range(1, 201):
        kind = "command" if n % 50 == 0 else "state"
        for c in (slow, fast):
            c.offer(frame(kind, n, A if n % 2 else B), 0.0)
        await asyncio.sleep(0)
    assert len(fast_sink.written) == 200  # never held back by the slow one
    slow_sink.released.set()
    while len(slow.buffer):
        await asyncio.sleep(0)
    await asyncio.sleep(0)
    got = [(f.type, f.mower_id) for f in slow_sink.written]
    commands = [f.id for f in slow_sink.written if f.type == "command"]
    assert commands == ["t50.c0.e0", "t100.c0.e0", "t150.c0.e0", "t200.c0.e0"]
    states = [f for f in slow_sink.written[1:] if f.type == "state"]
    assert {f.id for f in states} == {"t199.c0.e0", "t198.c0.e0"}  # the newest of A and B
    assert len(got) == 1 + 4 + 2
    assert metrics.conflated._value.get() == 196 - 2
    for c in (slow, fast):
        c.close("shutdown")
    assert await asyncio.gather(*tasks) == ["shutdown", "shutdown"]
    assert slow_sink.closed == "shutdown"


async def test_a_client_too_far_behind_is_closed_with_the_reason() -> None:
    metrics = RealtimeMetrics(CollectorRegistry())
    slow = client(max_events=10)
    sink = HeldSink(held=True)
    task = asyncio.ensure_future(slow.run(sink, metrics))
    slow.go_live()
    slow.offer(frame("command", 0, A), 0.0)
    await asyncio.sleep(0)
    for n in range(1, 12):
        slow.offer(frame("command", n, A), 0.0)
    assert slow.closed is not None and slow.closed.startswith("too-far-behind")
    sink.released.set()
    assert (await task).startswith("too-far-behind")
    assert sink.closed is not None and sink.closed.startswith("too-far-behind")
