"""JetStream in tests: fresh streams, a durable consumer's counts."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import nats.js.errors

from mowdeck.commands.streams import apply_all
from mowdeck.kit.bus import Bus, BusError

__all__ = ["fresh_streams", "recreate_streams", "unsettled"]


async def unsettled(
    bus: Bus, stream: str, durable: str, *, until: tuple[int, int] | None = None
) -> tuple[int, int]:
    """``(num_pending, num_ack_pending)`` of the durable.

    With ``until``, looked at again for up to 2 s until the counts are those: JetStream
    takes an ack in on its own time after reading it.
    """
    for _ in range(100):
        info = await bus.js.consumer_info(stream, durable)
        counts = (int(info.num_pending), int(info.num_ack_pending))
        if until is None or counts == until:
            break
        await asyncio.sleep(0.02)
    return counts


async def recreate_streams(
    bus: Bus, *, apply: Callable[[Bus], Awaitable[object]] = apply_all
) -> None:
    """Delete every stream on the bus's server, then run the admin step (``mowdeck streams``).

    The server removes a deleted stream's store in the background, so creating one of the
    same name at once is sometimes refused ("error creating store for stream", code 500):
    the admin step is tried again for up to 5 s.
    """
    for info in await bus.js.streams_info():
        await bus.js.delete_stream(info.config.name)
    for attempt in range(50):
        try:
            await apply(bus)
            return
        except (BusError, nats.js.errors.ServerError):
            if attempt == 49:
                raise
            await asyncio.sleep(0.1)


async def fresh_streams(url: str) -> None:
    """Delete every stream on the server at ``url`` and run the admin step (``mowdeck streams``)."""
    bus = await Bus.connect(url, name="test-streams")
    try:
        await recreate_streams(bus)
    finally:
        await bus.drain()
