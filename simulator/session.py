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
_EXPIRED_ON_ARRIVAL = "expired before it reached the mower"
_EXPIRED_WAITING = "expired while waiting to be carried out"
_LINK_LOST = "link lost before the command ran"


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
        # Commands waiting under a latency fault, each with the loop time it is due at.
        self._queue: deque[tuple[CommandFrame, CommandRecord, float]] = deque()
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
        """Close the WebSocket from the mower's side; commands still waiting fail."""
        self._abandon()
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
            self._abandon()

    def _abandon(self) -> None:
        """Stop handling commands: those still waiting fail, so each id has one outcome.

        The link is gone, so the outcome is only recorded; a resend of the same
        ``command_id`` on a later link is answered with it like any repeated id.
        """
        if self._worker is not None:
            self._worker.cancel()
        waiting = list(self._queue)
        self._queue.clear()
        now = datetime.now(UTC)
        for _, rec, _ in waiting:
            _settle(rec, _LINK_LOST, now)

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
        earlier = m.find(frame.command_id)
        if earlier is not None:
            # A repeated command id is answered again, never executed twice.
            earlier.frames += 1
            if earlier.status != "pending":
                await self._send_frame(_outcome(earlier))
            return
        rec = m.record(frame.command_id, frame.command, received)
        if m.transport.reject:
            await self._answer(rec, "rejected by the mower (fault injected)")
        elif frame.expires_at is not None and frame.expires_at <= received:
            await self._answer(rec, _EXPIRED_ON_ARRIVAL)
        elif isinstance(frame.command, EmergencyStop):
            await self._emergency_stop(frame, rec)
        elif m.transport.latency_ms or self._queue:
            # Ordinary commands keep their order behind a slow one; an e-stop does not.
            # Each is due its own latency after it arrived, not after the one before it.
            due = asyncio.get_running_loop().time() + m.transport.latency_ms / 1000.0
            self._queue.append((frame, rec, due))
            if self._worker is None or self._worker.done():
                self._worker = asyncio.create_task(self._drain())
        else:
            await self._execute(frame, rec)

    async def _emergency_stop(self, frame: CommandFrame, rec: CommandRecord) -> None:
        self._epoch += 1
        waiting = list(self._queue)
        self._queue.clear()
        # Settled before anything is awaited, so a link lost meanwhile leaves none pending.
        preempted = datetime.now(UTC)
        for _, earlier, _ in waiting:
            _settle(earlier, _PREEMPTED, preempted)
        await self._execute(frame, rec)
        for _, earlier, _ in waiting:
            await self._send_frame(_outcome(earlier))

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        while self._queue:
            epoch = self._epoch
            due = self._queue[0][2]
            await asyncio.sleep(max(0.0, due - loop.time()))
            if epoch != self._epoch or not self._queue:
                continue  # an emergency stop answered the waiting commands meanwhile
            frame, rec, _ = self._queue.popleft()
            if frame.expires_at is not None and frame.expires_at <= datetime.now(UTC):
                await self._answer(rec, _EXPIRED_WAITING)
                continue
            await self._execute(frame, rec)

    async def _execute(self, frame: CommandFrame, rec: CommandRecord) -> None:
        reason = self.fleet.mowers[self.i].execute(frame.command, self.fleet.clock.now())
        await self._answer(rec, reason)
        await self.fleet.report(self.i)

    async def _answer(self, rec: CommandRecord, reason: str | None) -> None:
        _settle(rec, reason, datetime.now(UTC))
        await self._send_frame(_outcome(rec))


def _settle(rec: CommandRecord, reason: str | None, at: datetime) -> None:
    """Give ``rec`` its one final outcome: executed without a reason, failed with one."""
    rec.status = "executed" if reason is None else "failed"
    rec.reason = reason
    rec.answered_at = at


def _outcome(rec: CommandRecord) -> OutcomeFrame:
    assert rec.answered_at is not None
    status: Literal["executed", "failed"] = "executed" if rec.status == "executed" else "failed"
    return OutcomeFrame(
        command_id=rec.command_id, status=status, at=rec.answered_at, reason=rec.reason
    )
