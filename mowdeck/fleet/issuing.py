"""The command hot path's I/O: the batched command journal and the publisher.

Both let concurrent requests share round trips: the journal stores every command that
arrived while the previous batch was being written in one statement, and the publisher
keeps many JetStream publishes in flight on the connection, each request awaiting only
its own acknowledgement.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime

import nats.errors

from contracts.v1 import CommandEnvelope
from mowdeck.fleet.ports import CommandLog, CommandRecord
from mowdeck.kit.bus import Bus, BusError, ExpiredCommandError
from mowdeck.kit.logging import service_context
from mowdeck.kit.publisher import Publisher

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
            # It writes every request's command: none of their ids is its own.
            self._writer = asyncio.get_running_loop().create_task(
                self._write(), name="fleet-command-journal", context=service_context()
            )
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
    """Publishes encoded command envelopes with their headers, many in flight on one connection.

    The subject, headers and expiry check are the kit ``Publisher``'s; acknowledgements
    that do not come within ``ack_timeout`` fail there, by its one deadline sweep.
    """

    def __init__(
        self, bus: Bus, *, clock: Callable[[], datetime], ack_timeout: float = 5.0
    ) -> None:
        self._clock = clock
        self._jetstream = Publisher(bus.nc, deadline=ack_timeout)

    async def publish(self, envelope: CommandEnvelope, body: bytes) -> None:
        """Publish on ``command.mower.<id>`` and return once JetStream stored it.

        ``Nats-Msg-Id`` is the command id and ``Mowdeck-Priority`` its priority (ADR 0009).
        Raises ``ExpiredCommandError`` for an expired envelope and ``BusError`` when no
        acknowledgement came.
        """
        try:
            ack = await self._jetstream.command(envelope, now=self._clock(), body=body)
            await ack
        except ExpiredCommandError:
            raise
        except (nats.errors.Error, BusError) as err:
            raise BusError(f"JetStream did not store command {envelope.command_id}") from err

    async def stop(self) -> None:
        """Stop reading acks (requests have finished by now)."""
        await self._jetstream.stop()
