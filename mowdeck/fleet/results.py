"""Command results: local waiters fed by core NATS, and a shared recorder of statuses."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import structlog
from nats.aio.msg import Msg
from nats.js import api

from contracts.v1 import CommandResult, ContractError, decode_result
from contracts.v1.subjects import COMMANDS, RESULT_FILTER, mower_id_from_subject
from mowdeck.fleet.errors import UnstorableError
from mowdeck.fleet.ports import CommandLog
from mowdeck.kit.batching import MicroBatchConsumer
from mowdeck.kit.bus import Bus
from mowdeck.kit.consumer import ConsumerSpec, DropMessage, RetryLater
from mowdeck.kit.logging import bound
from mowdeck.kit.storable import may_hold_nul, nul_field

__all__ = ["RECORDER_DURABLE", "ResultRecorder", "ResultWaiters"]

log = structlog.get_logger("mowdeck.fleet.results")
RECORDER_DURABLE = "fleet-command-results"


class ResultWaiters:
    """Requests waiting for a command's final result, on this instance only."""

    def __init__(self, bus: Bus) -> None:
        self._bus = bus
        self._waiting: dict[uuid.UUID, asyncio.Future[CommandResult]] = {}
        self._sub: Any = None

    async def start(self) -> None:
        """Subscribe to every result (core NATS: no replay, nothing to acknowledge)."""
        self._sub = await self._bus.nc.subscribe(RESULT_FILTER, cb=self._on_result)

    async def _on_result(self, msg: Msg) -> None:
        if not self._waiting:
            return
        try:
            result = decode_result(msg.data)
        except ContractError:
            return
        if not _of_its_subject(msg.subject, result):
            return
        future = self._waiting.get(result.command_id)
        if future is not None and not future.done() and result.is_final:
            future.set_result(result)

    @contextlib.contextmanager
    def expect(self, command_id: uuid.UUID) -> Iterator[asyncio.Future[CommandResult]]:
        """A future of the final result; enter it before publishing the command."""
        future: asyncio.Future[CommandResult] = asyncio.get_running_loop().create_future()
        self._waiting[command_id] = future
        try:
            yield future
        finally:
            self._waiting.pop(command_id, None)
            future.cancel()

    async def stop(self) -> None:
        """Unsubscribe; waiting requests time out on their own."""
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
            self._sub = None


class ResultRecorder:
    """Records command results from the COMMANDS stream, micro-batched.

    One durable consumer with a queue group: replicas share the work, and what arrives
    while every replica is down is delivered at the next start. Issued commands are not
    read back from the stream: the POST path records them (``CommandJournal``). The
    batching, acks and redeliveries are the kit's ``MicroBatchConsumer``.
    """

    def __init__(
        self,
        bus: Bus,
        log_: CommandLog,
        *,
        batch: int = 500,
        flush_seconds: float = 0.05,
        durable: str = RECORDER_DURABLE,
    ) -> None:
        self._log = log_
        spec = ConsumerSpec(
            stream=COMMANDS.name,
            subject=RESULT_FILTER,
            durable=durable,
            queue=durable,
            max_ack_pending=max(batch * 4, 1000),
            deliver_policy=api.DeliverPolicy.ALL,
        )
        self._consumer = MicroBatchConsumer(
            bus,
            spec,
            decode=_storable,
            commit=self._record,
            batch_max=batch,
            linger=flush_seconds,
            nak_delay=2.0,
        )
        self._on_message = self._consumer.on_message

    @property
    def alive(self) -> bool:
        """True while the results consumer delivers."""
        return self._consumer.alive

    async def start(self) -> None:
        """Bind the durable consumer and start recording."""
        await self._consumer.start()

    async def _record(
        self, results: list[CommandResult]
    ) -> Mapping[int, DropMessage | RetryLater] | None:
        try:
            await self._log.record((), results)
        except UnstorableError:
            # One result the database refuses must not hold back the rest of its batch.
            log.warning("command statuses refused as a batch; recording them one by one")
            return await self._record_each(results)
        return None

    async def _record_each(
        self, results: list[CommandResult]
    ) -> dict[int, DropMessage | RetryLater]:
        outcomes: dict[int, DropMessage | RetryLater] = {}
        for i, result in enumerate(results):
            with bound(mower_id=result.mower_id, command_id=result.command_id):
                try:
                    await self._log.record((), [result])
                except UnstorableError as err:
                    outcomes[i] = DropMessage(f"the database refuses it: {err}")
                except Exception:
                    log.exception(
                        "recording a command status failed; redelivering",
                        mower_id=str(result.mower_id),
                        command_id=str(result.command_id),
                    )
                    outcomes[i] = RetryLater("recording failed", delay=2.0)
        return outcomes

    async def stop(self) -> None:
        """Stop receiving and store what was received."""
        await self._consumer.stop()


def _of_its_subject(subject: str, result: CommandResult) -> bool:
    """True when ``result`` is of the mower its subject names (the gateway's only)."""
    try:
        return mower_id_from_subject(subject) == result.mower_id
    except ContractError:
        return False


def _storable(msg: Msg) -> CommandResult:
    """The result in ``msg``; ``DropMessage`` if it can never be stored."""
    try:
        result = decode_result(msg.data)
    except ContractError as err:
        raise DropMessage(f"undecodable: {err}") from err
    # Publishing is granted by subject: a result must be of the mower its subject names.
    if not _of_its_subject(msg.subject, result):
        raise DropMessage(f"subject-mismatch: {msg.subject} carries {result.mower_id}")
    # The contracts accept a NUL character, PostgreSQL does not: no redelivery helps.
    if may_hold_nul(msg.data) and (field := nul_field(result)) is not None:
        raise DropMessage(
            f"command result {result.command_id} ({result.status}) holds a NUL character in {field}"
        )
    return result
