"""Command deliveries held until their final result is stored: acknowledged on completion.

A delivery of the shard's durable consumer is acknowledged once the final result of its
command (executed, failed, expired, rejected) is stored on the stream, not at admission
(amendment 1 to ADR 0013, docs/gateway.md). Until then it is held here, by command id,
and reported as still being worked on (``+WPI``) every third of the ack wait, so a
command whose device takes long is not redelivered while it runs. The durable's
``max_ack_pending`` is the shard's bound on work taken in: what is held counts against
it, and what lies beyond it waits in JetStream, not in this process.

``FinalOutcomes`` remembers the ids whose final result is stored, a while: a delivery of
one of them (its ack was lost, or the previous process answered it and died before
acknowledging) is acknowledged with no new result.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable

import structlog
from nats.aio.msg import Msg

from mowdeck.gateway.metrics import GatewayMetrics
from mowdeck.kit.background import cancel_and_wait
from mowdeck.kit.batching import ack_together
from mowdeck.kit.wire import progress_all

__all__ = ["FinalOutcomes", "HeldDeliveries"]

log = structlog.get_logger("mowdeck.gateway.deliveries")

KEEP_FINALS_S = 600.0
FINALS_LIMIT = 200_000
# A command is answered by its expiry plus the device timeout at the latest (its expiry is
# checked right before the send). One still held this long after it expired lost its
# answer (its controller closed while its mower worked on it): it is given back, and
# admission decides again. Held for ever, it would hold the consumer's ack floor, and
# every start would read the stream from there.
GIVE_BACK_AFTER_EXPIRY_S = 120.0
# The acks decided in one loop turn are written together, at the end of that turn (the
# writer is woken by the first and runs after every callback already queued, such as
# the other publish acks read with it). A timer to gather more (2 ms, or 64 acks, before
# 2026-12-02) held every freed slot of the in-flight bound for a loop turn or more: at a
# small bound that was a tenth of the time a command held its slot, for no CPU saved.


class FinalOutcomes:
    """Ids of commands whose final result is stored, kept ``keep_s`` (at most ``limit``).

    A delivery can come back after its final result is stored only while its ack is
    outstanding: an ack lost with a reconnect (redelivered after the ack wait), or a
    process that died before acknowledging (redelivered to its successor, which read the
    results stored since the consumer's ack floor at start). Ten minutes covers both many
    times over. Ids are kept as integers: untracked by the garbage collector.
    """

    def __init__(self, *, keep_s: float = KEEP_FINALS_S, limit: int = FINALS_LIMIT) -> None:
        self._keep_s = keep_s
        self._limit = limit
        self._ids: OrderedDict[int, float] = OrderedDict()

    def add(self, command_id: uuid.UUID, now: float | None = None) -> None:
        """Remember that ``command_id``'s final result is stored."""
        now = time.monotonic() if now is None else now
        ids = self._ids
        key = command_id.int
        if key in ids:
            return
        ids[key] = now + self._keep_s
        while ids and (len(ids) > self._limit or next(iter(ids.values())) < now):
            ids.popitem(last=False)

    def __contains__(self, command_id: object) -> bool:
        return isinstance(command_id, uuid.UUID) and command_id.int in self._ids

    def __len__(self) -> int:
        return len(self._ids)


class HeldDeliveries:
    """The deliveries of commands admitted and not yet answered, by command id.

    ``finished`` (a final result is stored) acknowledges the command's delivery; the acks
    of one loop turn are written together (``ack_all``). ``sweep`` reports every held
    delivery as in progress.
    """

    def __init__(
        self,
        metrics: GatewayMetrics,
        *,
        progress_every: float,
        finals: FinalOutcomes | None = None,
        stream_pending: Callable[[], Awaitable[int]] | None = None,
        give_back_after_expiry_s: float = GIVE_BACK_AFTER_EXPIRY_S,
    ) -> None:
        self._metrics = metrics
        self._progress_every = progress_every
        self.finals = FinalOutcomes() if finals is None else finals
        self._stream_pending = stream_pending
        self._give_back_after_s = give_back_after_expiry_s
        # By command id: the newest delivery, and when the command expires (epoch s).
        self._held: dict[int, tuple[Msg, float]] = {}
        self._acks: list[Msg] = []
        self._wake = asyncio.Event()
        self._empty = asyncio.Event()
        self._empty.set()
        self._writer: asyncio.Task[None] | None = None
        self._sweeper: asyncio.Task[None] | None = None
        metrics.in_flight.set_function(self.__len__)  # read when scraped, not per command

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, command_id: object) -> bool:
        return isinstance(command_id, uuid.UUID) and command_id.int in self._held

    def start(self) -> None:
        """Start writing acks and reporting progress."""
        loop = asyncio.get_running_loop()
        self._writer = loop.create_task(self._write_acks(), name="gateway-acks")
        self._sweeper = loop.create_task(self._sweep_forever(), name="gateway-progress")

    @property
    def tasks(self) -> tuple[asyncio.Task[None] | None, asyncio.Task[None] | None]:
        """The ack writer and the progress sweeper (for ``/healthz``)."""
        return self._writer, self._sweeper

    def hold(self, command_id: uuid.UUID, msg: Msg, expires_at: float | None = None) -> None:
        """Hold ``msg`` until ``command_id``'s final result is stored.

        A later delivery of a command held already (a redelivery) takes the earlier one's
        place: the newest delivery is the one acknowledged. One whose final result is
        stored already is acknowledged at once. ``expires_at`` (epoch seconds): when the
        command expires, for giving back one that lost its answer (``sweep``).
        """
        if command_id in self.finals:
            self.ack(msg)
            return
        key = command_id.int
        if expires_at is None:  # a redelivery keeps what the first delivery said
            expires_at = self._held.get(key, (msg, float("inf")))[1]
        self._held[key] = (msg, expires_at)
        self._empty.clear()

    def ack(self, msg: Msg) -> None:
        """Acknowledge ``msg`` with the acks of this loop turn."""
        self._acks.append(msg)
        if len(self._acks) == 1:
            self._wake.set()

    def finished(self, command_id: uuid.UUID) -> None:
        """``command_id``'s final result is stored: acknowledge its delivery."""
        self.finals.add(command_id)
        held = self._held.pop(command_id.int, None)
        if held is None:
            return
        in_time = "true" if time.time() <= held[1] else "false"
        self._metrics.finished.labels(in_time).inc()
        self.ack(held[0])

    def release(self, command_id: uuid.UUID) -> Msg | None:
        """Stop holding ``command_id``'s delivery (it is settled otherwise); returns it."""
        held = self._held.pop(command_id.int, None)
        if held is None:
            return None
        if not self._held and not self._acks:
            self._empty.set()
        return held[0]

    async def wait_empty(self, timeout: float) -> bool:
        """Until nothing is held and every ack is written; False on timeout."""
        try:
            await asyncio.wait_for(self._empty.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def flush(self) -> None:
        """Write the acks decided so far."""
        acks, self._acks = self._acks, []
        if acks:
            # A delivery whose ack is lost comes back after the ack wait and is recognised
            # (its final result is remembered).
            await ack_together(acks)
        if not self._held and not self._acks:
            self._empty.set()

    async def _write_acks(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self.flush()

    async def sweep(self, now: float | None = None) -> None:
        """Report every held delivery as in progress; read the consumer's backlog.

        A delivery held ``give_back_after_expiry_s`` past its command's expiry is given
        back (``nak``) instead.
        """
        now = time.time() if now is None else now
        limit = now - self._give_back_after_s
        stale = [cid for cid, (_, expires) in self._held.items() if expires < limit]
        for key in stale:
            msg = self.release(uuid.UUID(int=key))
            log.warning(
                "a command lost its answer; its delivery is given back",
                command_id=str(uuid.UUID(int=key)),
            )
            if msg is not None:
                try:
                    await msg.nak()
                except Exception as err:
                    log.warning("could not give a delivery back", error=str(err))
        held = [msg for msg, _ in self._held.values()]
        if held:
            try:
                await progress_all(held)
                self._metrics.progress_acks.inc(len(held))
            except Exception as err:
                log.warning("could not report progress", count=len(held), error=str(err))
        if self._stream_pending is not None:
            try:
                self._metrics.waiting_in_stream.set(await self._stream_pending())
            except Exception as err:
                log.debug("consumer backlog not read", error=str(err))

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self._progress_every)
            await self.sweep()

    async def stop(self) -> None:
        """Write what is decided, then stop."""
        await cancel_and_wait(self._writer, name="command acks")
        await cancel_and_wait(self._sweeper, name="command progress")
        self._writer = self._sweeper = None
        await self.flush()
