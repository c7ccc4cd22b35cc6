"""Command intake: the emergency lane's stops, the stream consumer's callback, admission."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime

import structlog
from nats.aio.msg import Msg

from contracts.v1 import CommandEnvelope
from contracts.v1.subjects import PRIORITY_HEADER
from mowdeck.gateway.actor import EmergencySubmit, Submit
from mowdeck.gateway.admission import (
    Admitted,
    Decision,
    Expired,
    Foreign,
    Invalid,
    Rejected,
    admit,
)
from mowdeck.gateway.controller import SendToDevice, result_effect
from mowdeck.gateway.deliveries import HeldDeliveries
from mowdeck.gateway.effects import EffectRunner
from mowdeck.gateway.memory import CommandMemory
from mowdeck.gateway.metrics import GatewayMetrics
from mowdeck.gateway.mowers import ShardMowers
from mowdeck.kit.background import cancel_and_wait
from mowdeck.kit.batching import ack_together
from mowdeck.kit.bus import header
from mowdeck.kit.logging import bound
from mowdeck.kit.loop_scheduling import call_first_threadsafe
from mowdeck.kit.wire import delivery

__all__ = ["EMERGENCY_MARKER", "CommandIntake"]

log = structlog.get_logger("mowdeck.gateway")
_debug = logging.getLogger("mowdeck.gateway")

Tell = Callable[[uuid.UUID, object], None]

# The priority header's value of a stop, as it appears in a raw header block: the
# emergency lane drops every message without it before building anything.
EMERGENCY_MARKER = b"emergency"

# Decisions that would answer or run a command again if it was admitted before.
_ANSWERED_HERE = (Rejected, Expired, Admitted)
# A command for a mower the shard does not know before Fleet's list came comes back after.
_UNSEEDED_RETRY_SECONDS = 0.5
REMEMBER_LIMIT = 100_000  # ids the shard remembers at most (see ``memory``)


class CommandIntake:
    """Admits delivered commands in ADR 0013's order and hands them to the controllers.

    The emergency lane is chosen from the header before anything is decoded. A stop is
    admitted in the callback that delivers it; ordinary commands wait in a local queue
    that a task admits, so a backlog of them cannot hold a stop back.
    """

    def __init__(
        self,
        *,
        shard_index: int,
        shard_count: int,
        mowers: ShardMowers,
        metrics: GatewayMetrics,
        effects: EffectRunner,
        tell: Tell,
        held: HeldDeliveries | None = None,
        seeded: Callable[[], bool] = lambda: True,
    ) -> None:
        """``held``: where deliveries wait for their command's final result (one of its
        own, reporting progress every 10 s, when not given). ``seeded()``: whether the
        shard's mowers are seeded from Fleet; until then a mower not known yet is no
        reason to reject its command (it is given back, and comes again)."""
        self._shard_index = shard_index
        self._shard_count = shard_count
        self._mowers = mowers
        self._metrics = metrics
        self._effects = effects
        self._tell = tell
        self._seeded = seeded
        self.closing = False
        # Stops the lane brings are still sent while closing: the commands admitted
        # before still run until their results are out, and a stop must win over them.
        # Only once the controllers are closed does the lane stop acting.
        self.stops_closed = False
        # The ids this shard admitted: a redelivery of one (its ack was lost with a
        # reconnect, or the stream copy of a stop the lane brought) must produce no second
        # result, and admission would answer it again (``expired``, ``rejected``) under a
        # msg id its first result did not have.
        self.admitted = CommandMemory(limit=REMEMBER_LIMIT)
        self.held = HeldDeliveries(metrics, progress_every=10.0) if held is None else held
        # Ordinary deliveries awaiting admission, with when they arrived.
        self._normal: deque[tuple[Msg, float]] = deque()
        self._normal_ready = asyncio.Event()
        # Deliveries settled without a result to wait for (other shards' commands, ones
        # answered before): acknowledged together, once per batch.
        self._acks: list[Msg] = []
        self._callbacks = 0
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The task that admits ordinary commands."""
        return self._task

    def start(self) -> None:
        """Start admitting ordinary commands."""
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._admit_normal(), name="admit-normal")

    async def release(self) -> None:
        """Refuse new deliveries and give back what was not admitted yet."""
        self.closing = True
        await self._flush_acks()  # what was decided is settled before anything is given back
        while self._normal:
            msg, _ = self._normal.popleft()
            await self._refuse_while_closing(msg)  # the next owner runs it

    async def stop(self) -> None:
        """Stop the admitting task (after ``release`` and the results are out)."""
        if self._task is not None:
            await cancel_and_wait(self._task, name="admission")
            self._task = None

    async def on_command(self, msg: Msg) -> None:
        """A delivery of the durable consumer."""
        if self.closing:
            await self._refuse_while_closing(msg)
            return
        if header(msg, PRIORITY_HEADER) == "emergency":
            await self._admit_safely(msg)
            await self._flush_acks()
            return
        self._normal.append((msg, time.perf_counter()))
        self._normal_ready.set()
        await self._turn()

    async def _turn(self) -> None:
        # nats-py drains a subscription's queue without yielding while our callbacks do
        # not: a backlog of thousands would hold the loop (and a stop's send) for tens of
        # milliseconds. Yield now and then.
        self._callbacks += 1
        if self._callbacks % 32 == 0:
            await asyncio.sleep(0)

    def on_lane_message(self, msg: Msg) -> None:
        """On the emergency lane's thread: a stop's announcement, as it was published.

        Only stops are acted on: admitted here (admission is pure and only reads the
        registry), then handed to the loop ahead of everything it has queued. Refusals
        are answered when the stream delivers the stop.
        """
        if self.stops_closed:
            return
        if header(msg, PRIORITY_HEADER) != "emergency":
            return  # everything but a stop waits for the stream
        delivered = time.perf_counter()
        decision = self._decide(msg, datetime.now(UTC))
        if isinstance(decision, Admitted) and decision.envelope.is_emergency:
            assert self._loop is not None
            call_first_threadsafe(self._loop, self._send_stop, decision.envelope, delivered)
        elif not isinstance(decision, Foreign):
            # Counted, not logged: the lane's thread must not wait on a log handler, and
            # a stop's stream copy is answered or terminated with the reason.
            reason = "invalid" if isinstance(decision, Invalid) else "refused"
            if isinstance(decision, Admitted):
                reason = "not_a_stop"
            self._metrics.lane_ignored.labels(reason).inc()

    def _decide(self, msg: Msg, now: datetime) -> Decision:
        # Admission of this shard (pure; safe on the lane's thread too).
        return admit(
            msg.subject,
            msg.data,
            shard_index=self._shard_index,
            shard_count=self._shard_count,
            mowers=self._mowers,
            now=now,
        )

    def _send_stop(self, envelope: CommandEnvelope, delivered: float) -> None:
        # On the loop, before anything else it had ready. An admitted stop has one
        # possible decision, so it goes to the device from here, without waiting for a
        # worker; the controller is told it was sent.
        cid = envelope.command_id
        if self.stops_closed or cid in self.admitted or cid in self.held.finals:
            return  # a duplicate publish of a stop is sent once, by one process
        self.admitted.remember(envelope, datetime.now(UTC))
        self._effects.stop_delivered(envelope.command_id, delivered)
        self._effects.stop_sent_ahead(envelope.mower_id, envelope.command_id)
        self._effects(envelope.mower_id, [SendToDevice(envelope)])
        self._tell(
            envelope.mower_id, EmergencySubmit(envelope, None, sent=True, admitted_at=delivered)
        )

    async def _admit_normal(self) -> None:
        while True:
            await self._normal_ready.wait()
            self._normal_ready.clear()
            handled = 0
            while self._normal:
                msg, arrived = self._normal.popleft()
                await self._admit_safely(msg, arrived)
                handled += 1
                if handled % 64 == 0:
                    await self._flush_acks()
                    await asyncio.sleep(0)  # let the emergency lane and the links in
            await self._flush_acks()

    async def _flush_acks(self) -> None:
        # One write for the batch (``ack_all``). A delivery whose ack is lost comes back
        # and is recognised as admitted before; one that cannot be settled at all now is
        # given back by JetStream after the ack wait, as an ack lost on the wire would be.
        acks, self._acks = self._acks, []
        await ack_together(acks)

    async def _refuse_while_closing(self, msg: Msg) -> None:
        # Given back, for the next owner of the shard to run; unless this gateway admitted
        # it already (the stream copy of a stop the emergency lane brought, a redelivery):
        # the next owner has no memory of it and would run it a second time.
        decision = self._decide(msg, datetime.now(UTC))
        envelope = getattr(decision, "envelope", None)
        try:
            if envelope is not None and envelope.command_id in self.held:
                self.held.hold(envelope.command_id, msg)  # acknowledged with its result
            elif envelope is not None and (
                envelope.command_id in self.admitted or envelope.command_id in self.held.finals
            ):
                await msg.ack()
            else:
                await msg.nak()
        except Exception as err:
            log.warning("could not settle a delivery while closing", error=str(err))

    async def _admit_safely(self, msg: Msg, arrived: float | None = None) -> None:
        # One failure (a settle on a connection being replaced, a bug) must cost this
        # delivery at most, never the admission of every command after it.
        try:
            await self._admit(msg, arrived)
        except Exception:
            self._metrics.refused.labels("error").inc()
            log.exception("admission failed; the delivery is given back", subject=msg.subject)
            try:
                await msg.nak(delay=1.0)
            except Exception as err:
                log.warning("could not give a delivery back", error=str(err))

    def _seen_before(self, decision: Decision, msg: Msg, sequence: int) -> bool:
        """True when ``msg`` delivers a command admitted before, now settled with no result.

        Still running: the redelivery takes the earlier delivery's place and is
        acknowledged with the result. Answered, here or by the process before this one:
        acknowledged now. Its controller may have restarted since, with no memory of it.
        The stream copy of a stop still goes on: it sets the controller's boundary; one
        the process before this one answered (its lane sent the stop, then the process
        stopped) goes on to set the boundary only, never to the device again.
        """
        if not isinstance(decision, _ANSWERED_HERE):
            return False
        if isinstance(decision, Admitted) and decision.envelope.is_emergency:
            return self._stop_answered_before(decision.envelope, msg, sequence)
        cid, held = decision.envelope.command_id, self.held
        if cid in held:
            held.hold(cid, msg)
            self._metrics.duplicates.inc()
            return True
        if cid in self.admitted:
            self._metrics.duplicates.inc()
        elif cid in held.finals:
            self._metrics.answered_before.inc()
        else:
            return False
        self._acks.append(msg)
        return True

    def _stop_answered_before(self, envelope: CommandEnvelope, msg: Msg, sequence: int) -> bool:
        cid = envelope.command_id
        if cid not in self.held.finals or cid in self.admitted or cid in self.held:
            return False
        self._tell(envelope.mower_id, EmergencySubmit(envelope, sequence, answered=True))
        self.admitted.remember(envelope, datetime.now(UTC))
        self._metrics.answered_before.inc()
        self._acks.append(msg)
        return True

    async def _unseeded(self, decision: Decision, msg: Msg, now: datetime) -> bool:
        """True when ``msg`` is for a mower not known yet, before the shard is seeded:
        given back to come again, or answered ``expired`` once it is."""
        if not isinstance(decision, Rejected) or decision.reason != "unknown mower":
            return False
        if self._seeded():
            return False
        envelope = decision.envelope
        if envelope.is_expired(now):
            self._effects(envelope.mower_id, [result_effect(envelope, "expired", now)])
            self.held.hold(envelope.command_id, msg, envelope.expires_at.timestamp())
        else:
            self._metrics.refused.labels("unseeded").inc()
            await msg.nak(delay=_UNSEEDED_RETRY_SECONDS)
        return True

    async def _admit(self, msg: Msg, arrived: float | None = None) -> None:
        delivered = time.perf_counter()
        if arrived is not None:
            self._metrics.admission_wait.observe(delivered - arrived)
        deliveries, sequence = delivery(msg.reply)
        if deliveries > 1:
            self._metrics.redeliveries.inc()
        now = datetime.now(UTC)
        decision = self._decide(msg, now)
        if self._seen_before(decision, msg, sequence) or await self._unseeded(decision, msg, now):
            return
        held = self.held
        match decision:
            case Invalid(reason):
                self._metrics.refused.labels("invalid").inc()
                await msg.term()
                log.warning("command terminated", subject=msg.subject, reason=reason)
            case Foreign():
                self._metrics.foreign.inc()
                self._acks.append(msg)
            case Rejected(envelope, reason):
                label = "unknown_mower" if reason == "unknown mower" else "account_mismatch"
                self._metrics.refused.labels(label).inc()
                with _about(envelope):
                    self._effects(
                        envelope.mower_id, [result_effect(envelope, "rejected", now, reason)]
                    )
                    held.hold(envelope.command_id, msg, envelope.expires_at.timestamp())
                    log.info(
                        "command rejected",
                        mower_id=str(envelope.mower_id),
                        command_id=str(envelope.command_id),
                        reason=reason,
                    )
            case Expired(envelope):
                self._metrics.refused.labels("expired").inc()
                with _about(envelope):
                    self._effects(envelope.mower_id, [result_effect(envelope, "expired", now)])
                    held.hold(envelope.command_id, msg, envelope.expires_at.timestamp())
            case Admitted(envelope, _):
                if envelope.is_emergency:
                    # A stop whose header was missing still wins once decoded.
                    self._effects.stop_delivered(envelope.command_id, delivered)
                    self._tell(
                        envelope.mower_id,
                        EmergencySubmit(envelope, sequence, admitted_at=delivered),
                    )
                else:
                    self._tell(envelope.mower_id, Submit(envelope, sequence, delivered))
                # Remembered once its controller has it: a delivery given back because the
                # hand-over failed must be admitted when it comes back, not taken for a
                # duplicate.
                self.admitted.remember(envelope, now)
                self._metrics.admitted_kind(envelope.kind).inc()
                # Acknowledged once its final result is stored (a stop's stream copy at
                # once, when the stop the lane sent is answered already).
                held.hold(envelope.command_id, msg, envelope.expires_at.timestamp())
                if _debug.isEnabledFor(logging.DEBUG):
                    log.debug(
                        "command admitted",
                        mower_id=str(envelope.mower_id),
                        command_id=str(envelope.command_id),
                        kind=envelope.kind,
                    )


def _about(envelope: CommandEnvelope) -> AbstractContextManager[None]:
    # A refused command's lines name it: the admitted ones, by far the most, log with
    # their ids passed (debug only) and pay for no binding.
    return bound(
        mower_id=envelope.mower_id, command_id=envelope.command_id, account_id=envelope.account_id
    )
