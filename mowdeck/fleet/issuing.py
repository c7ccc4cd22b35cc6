"""The command hot path's I/O: the batched command journal and the pipelined publisher.

Both let concurrent requests share round trips: the journal stores every command that
arrived while the previous batch was being written in one statement, and the publisher
keeps many JetStream publishes in flight on the connection, each request awaiting only
its own acknowledgement.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime
from typing import Any

import nats.errors

from contracts.v1 import CommandEnvelope
from contracts.v1.subjects import PRIORITY_HEADER, command_subject
from mowdeck.fleet.ports import CommandLog, CommandRecord
from mowdeck.kit.bus import Bus, BusError, ExpiredCommandError

__all__ = ["CommandJournal", "CommandPublisher"]

_Waiter = tuple[CommandRecord, asyncio.Future[None]]


class CommandJournal:
    """Records issued commands in batches; ``record`` returns once its batch committed.

    One write is in flight at a time. Whatever arrives meanwhile forms the next batch, so
    batches grow with the load and a lone request waits for one statement only.
    """

    def __init__(self, log: CommandLog, *, batch: int = 500) -> None:
        self._log = log
        self._batch = batch
        self._pending: list[_Waiter] = []
        self._writer: asyncio.Task[None] | None = None

    async def record(self, command: CommandRecord) -> None:
        """Store ``command``; raises what the command log raised for its batch."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((command, future))
        if self._writer is None:
            self._writer = asyncio.create_task(self._write(), name="fleet-command-journal")
        await future

    async def _write(self) -> None:
        try:
            while self._pending:
                batch = self._pending[: self._batch]
                del self._pending[: self._batch]
                try:
                    await self._log.record([command for command, _ in batch], ())
                except Exception as err:
                    for _, future in batch:
                        if not future.done():  # a cancelled request no longer waits
                            future.set_exception(err)
                    continue
                for _, future in batch:
                    if not future.done():
                        future.set_result(None)
        finally:
            self._writer = None

    async def stop(self) -> None:
        """Wait for the batch being written (requests have finished by now)."""
        if self._writer is not None:
            await asyncio.gather(self._writer, return_exceptions=True)


class CommandPublisher:
    """Publishes encoded command envelopes with their headers, pipelined on one connection.

    Acknowledgements that do not come within ``ack_timeout`` fail with ``TimeoutError``;
    one sweeper checks every ``ack_timeout / 10`` (a timer per request costs more than
    the rest of the publish).
    """

    def __init__(
        self, bus: Bus, *, clock: Callable[[], datetime], ack_timeout: float = 5.0
    ) -> None:
        self._bus = bus
        self._clock = clock
        self._ack_timeout = ack_timeout
        self._deadlines: deque[tuple[float, asyncio.Future[Any]]] = deque()
        self._sweeper: asyncio.Task[None] | None = None

    async def publish(self, envelope: CommandEnvelope, body: bytes) -> None:
        """Publish on ``command.mower.<id>`` and return once JetStream stored it.

        ``Nats-Msg-Id`` is the command id and ``Mowdeck-Priority`` its priority (ADR 0009).
        Raises ``ExpiredCommandError`` for an expired envelope and ``BusError`` when no
        acknowledgement came.
        """
        if envelope.is_expired(self._clock()):
            raise ExpiredCommandError(
                f"command {envelope.command_id} expired at {envelope.expires_at}"
            )
        try:
            ack = await self._bus.publish_nowait(
                command_subject(envelope.mower_id),
                body,
                msg_id=str(envelope.command_id),
                headers={PRIORITY_HEADER: envelope.priority or "normal"},
            )
            self._deadlines.append((time.monotonic() + self._ack_timeout, ack))
            if self._sweeper is None:
                self._sweeper = asyncio.create_task(self._sweep(), name="fleet-ack-timeouts")
            await ack
        except (nats.errors.Error, TimeoutError) as err:
            raise BusError(f"JetStream did not store command {envelope.command_id}") from err

    async def _sweep(self) -> None:
        try:
            while self._deadlines:
                await asyncio.sleep(self._ack_timeout / 10)
                now = time.monotonic()
                while self._deadlines and (
                    self._deadlines[0][0] <= now or self._deadlines[0][1].done()
                ):
                    _, ack = self._deadlines.popleft()
                    if not ack.done():
                        # Failing the future also frees its slot among nats' pending acks.
                        ack.set_exception(TimeoutError("no JetStream acknowledgement"))
        finally:
            self._sweeper = None

    async def stop(self) -> None:
        """Stop the sweeper (requests have finished by now)."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
