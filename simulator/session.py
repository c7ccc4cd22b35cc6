"""One gateway's WebSocket to one mower: commands in, outcomes and states out."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from datetime import UTC, datetime
from typing import Literal

from aiohttp import web

from contracts.v1 import EmergencyStop
from simulator.fleet import SimulatorFleet
from simulator.model import CommandRecord
from simulator.protocol import (
    CommandFrame,
    ErrorFrame,
    Frame,
    Hello,
    OutcomeFrame,
    ProtocolError,
    decode_gateway_frame,
    encode_frame,
)

__all__ = ["FIRMWARE", "MowerSession"]

FIRMWARE = "mowdeck-sim/1"
# States are skipped, not queued, once this much is unsent: the latest state wins.
_WRITE_BUFFER_LIMIT = 32 * 1024
_PREEMPTED = "preempted by emergency_stop"


class MowerSession:
    """The mower's side of one WebSocket; answers every command with one outcome."""

    __slots__ = ("_epoch", "_queue", "_worker", "fleet", "i", "transport", "ws")

    def __init__(
        self, ws: web.WebSocketResponse, request: web.Request, fleet: SimulatorFleet, i: int
    ) -> None:
        self.ws = ws
        self.transport = request.transport
        self.fleet = fleet
        self.i = i
        self._queue: deque[tuple[CommandFrame, CommandRecord]] = deque()
        self._worker: asyncio.Task[None] | None = None
        self._epoch = 0  # bumped by an emergency stop: commands waiting before it are void

    def writable(self) -> bool:
        """False when the peer lags; the fleet then skips a periodic state."""
        t = self.transport
        return (
            t is not None
            and not t.is_closing()
            and (t.get_write_buffer_size() < _WRITE_BUFFER_LIMIT)
        )

    async def send(self, data: bytes) -> None:
        """Send one frame; a link closing under us is not an error."""
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.ws.send_bytes(data)

    async def _send_frame(self, frame: Frame) -> None:
        await self.send(encode_frame(frame))

    async def drop(self, reason: str) -> None:
        """Close the WebSocket from the mower's side."""
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.ws.close(code=4001, message=reason.encode()[:120])

    async def serve(self) -> None:
        """Say hello, report the state, then read frames until the link closes."""
        m = self.fleet.mowers[self.i]
        await self._send_frame(Hello(mower_id=m.mower_id, name=m.name, firmware=FIRMWARE))
        await self.fleet.report(self.i)
        try:
            async for msg in self.ws:
                if msg.type in (web.WSMsgType.TEXT, web.WSMsgType.BINARY):
                    await self.on_frame(msg.data)
        finally:
            if self._worker is not None:
                self._worker.cancel()

    async def on_frame(self, data: bytes | str) -> None:
        """Handle one frame from the gateway."""
        m = self.fleet.mowers[self.i]
        received = datetime.now(UTC)
        try:
            frame = decode_gateway_frame(data)
        except ProtocolError as err:
            if err.command_id is None:
                await self._send_frame(ErrorFrame(reason=err.reason))
                return
            await self._answer(m.record(err.command_id, None, received), err.reason)
            return
        earlier = _find(m.commands, frame)
        if earlier is not None:
            # A repeated command id is answered again, never executed twice.
            if earlier.status != "pending":
                await self._send_frame(_outcome(earlier))
            return
        rec = m.record(frame.command_id, frame.command, received)
        if m.transport.reject:
            await self._answer(rec, "rejected by the mower (fault injected)")
        elif frame.expires_at is not None and frame.expires_at <= received:
            await self._answer(rec, "expired before it reached the mower")
        elif isinstance(frame.command, EmergencyStop):
            await self._emergency_stop(frame, rec)
        elif m.transport.latency_ms or self._queue:
            # Ordinary commands keep their order behind a slow one; an e-stop does not.
            self._queue.append((frame, rec))
            if self._worker is None or self._worker.done():
                self._worker = asyncio.create_task(self._drain())
        else:
            await self._execute(frame, rec)

    async def _emergency_stop(self, frame: CommandFrame, rec: CommandRecord) -> None:
        self._epoch += 1
        waiting = list(self._queue)
        self._queue.clear()
        await self._execute(frame, rec)
        for _, earlier in waiting:
            await self._answer(earlier, _PREEMPTED)

    async def _drain(self) -> None:
        while self._queue:
            epoch = self._epoch
            await asyncio.sleep(self.fleet.mowers[self.i].transport.latency_ms / 1000.0)
            if epoch != self._epoch or not self._queue:
                continue  # an emergency stop answered the waiting commands meanwhile
            frame, rec = self._queue.popleft()
            await self._execute(frame, rec)

    async def _execute(self, frame: CommandFrame, rec: CommandRecord) -> None:
        reason = self.fleet.mowers[self.i].execute(frame.command, self.fleet.clock.now())
        await self._answer(rec, reason)
        await self.fleet.report(self.i)

    async def _answer(self, rec: CommandRecord, reason: str | None) -> None:
        rec.status = "executed" if reason is None else "failed"
        rec.reason = reason
        rec.answered_at = datetime.now(UTC)
        await self._send_frame(_outcome(rec))


def _outcome(rec: CommandRecord) -> OutcomeFrame:
    assert rec.answered_at is not None
    status: Literal["executed", "failed"] = "executed" if rec.status == "executed" else "failed"
    return OutcomeFrame(
        command_id=rec.command_id, status=status, at=rec.answered_at, reason=rec.reason
    )


def _find(log: deque[CommandRecord] | None, frame: CommandFrame) -> CommandRecord | None:
    if not log:
        return None
    return next((r for r in reversed(log) if r.command_id == frame.command_id), None)
