"""JetStream in tests: fresh streams, a durable consumer's counts."""

from __future__ import annotations

import asyncio

from mowdeck.commands.streams import apply_all
from mowdeck.kit.bus import Bus

__all__ = ["fresh_streams", "unsettled"]


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


async def fresh_streams(url: str) -> None:
    """Delete every stream on the server at ``url`` and run the admin step (``mowdeck streams``)."""
    bus = await Bus.connect(url, name="test-streams")
    try:
        for info in await bus.js.streams_info():
            await bus.js.delete_stream(info.config.name)
        await apply_all(bus)
    finally:
        await bus.drain()
