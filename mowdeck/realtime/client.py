"""One open stream: who reads it, what it may see, its send buffer and its writer loop."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Literal, Protocol

import msgspec
from prometheus_client import Counter

from mowdeck.realtime.buffer import SendBuffer
from mowdeck.realtime.frames import Frame
from mowdeck.realtime.metrics import RealtimeMetrics

__all__ = ["Client", "Sink", "Transport"]

Transport = Literal["sse", "ws"]

WRITE_BATCH = 64
"""Frames per write at most: a slow client's transport gets a batch, the rest conflates."""


class Sink(Protocol):
    """Where a client's frames are written: an SSE response or a WebSocket."""

    async def write(self, frames: list[Frame]) -> None:
        """Write ``frames`` in order; returns once the transport took them."""
        ...

    async def close(self, reason: str) -> None:
        """Tell the client why the stream ends (when it still listens), then end it."""
        ...


class Client:
    """A connected reader; the hub offers it frames, its writer loop sends them."""

    def __init__(
        self,
        *,
        user_id: str,
        account_id: uuid.UUID,
        transport: Transport,
        types: frozenset[str],
        requested: frozenset[uuid.UUID] | None,
        visible: frozenset[uuid.UUID],
        buffer: SendBuffer,
    ) -> None:
        self.user_id = user_id
        self.account_id = account_id
        self.transport = transport
        self.types = types
        self.requested = requested
        self.mowers: frozenset[uuid.UUID] = self.narrow(visible)
        self.buffer = buffer
        self.closed: str | None = None  # the reason, once closing
        self.live = False  # frames are held while the snapshot or a replay is written
        self.conflated_metric: Counter | None = None  # counts each state replaced unsent
        self._wake = asyncio.Event()

    def narrow(self, visible: frozenset[uuid.UUID]) -> frozenset[uuid.UUID]:
        """The mowers this stream shows out of ``visible``."""
        return visible if self.requested is None else visible & self.requested

    def offer(self, item: Frame, now: float) -> None:
        """Queue a frame; a client too far behind is closed instead."""
        if self.closed is not None:
            return
        buffer = self.buffer
        before = buffer.conflated
        reason = buffer.push(item, now)
        if buffer.conflated != before and self.conflated_metric is not None:
            self.conflated_metric.inc()
        if reason is not None:
            self.close(reason)
            return
        if self.live:
            self._wake.set()

    def close(self, reason: str) -> None:
        """End the stream with ``reason`` (idempotent; the first reason stays)."""
        if self.closed is None:
            self.closed = reason
        self._wake.set()

    def go_live(self) -> None:
        """Start sending what the buffer holds and whatever comes."""
        self.live = True
        self._wake.set()

    async def run(self, sink: Sink, metrics: RealtimeMetrics) -> str:
        """Write frames until the stream is closed; returns the reason."""
        wake = self._wake
        buffer = self.buffer
        delivered, latency = metrics.delivered, metrics.fanout
        try:
            while self.closed is None:
                await wake.wait()
                wake.clear()
                if self.closed is not None or not self.live:
                    continue
                frames = buffer.take(WRITE_BATCH)
                if not frames:
                    continue
                await sink.write(frames)
                delivered.inc(len(frames))
                latency.observe(time.monotonic() - frames[0].born)
                if len(buffer):
                    wake.set()  # more than one batch was waiting
        except (ConnectionError, RuntimeError) as err:
            # The client went away (aiohttp raises ClientConnectionResetError, a
            # ConnectionResetError, or RuntimeError on a closing transport).
            self.close(f"disconnected: {type(err).__name__}")
            return self.closed or "disconnected"
        reason = self.closed
        await sink.close(reason)
        return reason


def close_data(reason: str) -> bytes:
    """The body of a ``close`` event."""
    return msgspec.json.encode({"reason": reason})
