"""The loop side of the controllers: publishes, device sends and timers, never blocking."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any

import structlog

from contracts.v1 import (
    CommandEnvelope,
    CommandResult,
    EventEnvelope,
    ManualDrive,
    MowerLink,
    MowerState,
)
from mowdeck.gateway.actor import DeviceOutcome, DriveCheck
from mowdeck.gateway.connections import (
    CommandTimeoutError,
    LinkDownError,
    LinkLostError,
    MowerConnection,
)
from mowdeck.gateway.controller import (
    PREEMPTED,
    Effect,
    EndDrive,
    PublishLink,
    PublishResult,
    PublishState,
    ScheduleDriveCheck,
    SendToDevice,
    clean_reason,
)
from mowdeck.gateway.metrics import GatewayMetrics
from mowdeck.gateway.mower_keys import MowerKeys
from mowdeck.kit.background import BackgroundTasks, cancel_and_wait
from mowdeck.kit.bus import Bus
from mowdeck.kit.logging import bound
from mowdeck.kit.loop_scheduling import eager_task
from mowdeck.kit.publisher import Publisher

__all__ = ["EffectRunner", "PendingCommands"]

ACK_TIMEOUT = 5.0

log = structlog.get_logger("mowdeck.gateway.effects")
_stdlog = logging.getLogger("mowdeck.gateway.effects")

Tell = Callable[[uuid.UUID, object], None]


class PendingCommands:
    """Admitted commands whose final result is not published yet; shutdown waits on it."""

    def __init__(self) -> None:
        self._started: dict[uuid.UUID, float] = {}
        self._empty = asyncio.Event()
        self._empty.set()

    def add(self, command_id: uuid.UUID, admitted_at: float | None = None) -> None:
        """A command was accepted by its controller (admitted at ``admitted_at``, if known)."""
        self._started.setdefault(
            command_id, time.perf_counter() if admitted_at is None else admitted_at
        )
        self._empty.clear()

    def finish(self, command_id: uuid.UUID) -> float | None:
        """Its final result is published; returns the seconds since admission."""
        started = self._started.pop(command_id, None)
        if not self._started:
            self._empty.set()
        return None if started is None else time.perf_counter() - started

    def __len__(self) -> int:
        return len(self._started)

    async def wait_empty(self, timeout: float) -> bool:
        """Wait until nothing is pending; False on timeout."""
        try:
            await asyncio.wait_for(self._empty.wait(), timeout)
        except TimeoutError:
            return False
        return True


class EffectRunner:
    """Performs controller effects on the event loop."""

    def __init__(
        self,
        bus: Bus,
        metrics: GatewayMetrics,
        *,
        connections: Mapping[uuid.UUID, MowerConnection],
        tell: Tell,
        device_timeout: float,
        producer: str,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        keys: MowerKeys | None = None,
        on_final: Callable[[uuid.UUID], None] | None = None,
    ) -> None:
        """``on_final``: told of each command whose final result the stream stored (its
        delivery is acknowledged then)."""
        self._bus = bus
        self.on_final = on_final
        # The mowers' ids as text, formatted once: subjects and msg ids are built from them.
        self._keys = MowerKeys() if keys is None else keys
        self._metrics = metrics
        self._connections = connections
        self._tell = tell
        self._device_timeout = device_timeout
        self._producer = producer
        self._clock = clock
        self.pending = PendingCommands()
        # Emergency stops: when the gateway first saw each, for the latency metric (bounded:
        # the stream copy of a stop the emergency lane brought is never sent, so its entry
        # is never taken out).
        self._delivered_at: OrderedDict[uuid.UUID, float] = OrderedDict()
        # Per mower: how many stops were written (an ordinary send decided before the
        # latest one is not written after it), and the stop the lane sent before its
        # controller was told.
        self._stop_epochs: dict[uuid.UUID, int] = {}
        self._stops_ahead: dict[uuid.UUID, uuid.UUID] = {}
        self._tasks = BackgroundTasks()
        # Results and states leave through one task, in decision order, many acks in flight.
        self._outgoing: deque[CommandResult | tuple[MowerState, str]] = deque()
        self._wake = asyncio.Event()
        # A result's ack that does not come within ACK_TIMEOUT fails its future.
        self._jetstream = Publisher(bus.nc, deadline=ACK_TIMEOUT, key=self._keys.key)
        self._publisher: asyncio.Task[None] | None = None

    @property
    def publisher(self) -> asyncio.Task[None] | None:
        """The task that publishes results and states in decision order."""
        return self._publisher

    async def start(self) -> None:
        """Start the ordered publisher."""
        await self._jetstream.start()
        self._publisher = asyncio.create_task(self._publish(), name="gateway-publisher")

    def __call__(self, mower_id: uuid.UUID, effects: Sequence[Effect]) -> None:
        """Perform the effects of one controller decision (called on the loop)."""
        for effect in effects:
            match effect:
                case PublishResult(result, admitted_at):
                    if result.status == "accepted":
                        self.pending.add(result.command_id, admitted_at)
                    if self._stops_ahead.get(mower_id) == result.command_id:
                        # The controller has taken in the stop the lane sent ahead of it:
                        # what it decides from here on, it decides knowing of the stop.
                        del self._stops_ahead[mower_id]
                    self._enqueue(result)
                case SendToDevice(envelope) if envelope.is_emergency:
                    # Written to the device inside this call, not a loop turn later.
                    self._stop_epochs[mower_id] = self._stop_epochs.get(mower_id, 0) + 1
                    self._tasks.track(eager_task(self._send(envelope)))
                case SendToDevice(envelope) if mower_id in self._stops_ahead:
                    # Decided before its controller knew of the stop the lane sent: it
                    # was published before the stop, which overtook it.
                    self._tell(mower_id, DeviceOutcome(envelope, "rejected", PREEMPTED))
                case SendToDevice(envelope):
                    self._tasks.spawn(self._send(envelope, self._stop_epochs.get(mower_id, 0)))
                case PublishState(state, heartbeat):
                    # A heartbeat gets an id of its own (the time it was due): republishing
                    # an unchanged state under the state's id would be dropped by the
                    # stream's duplicate window (30 s), and most heartbeats with it.
                    self._enqueue((state, f":hb:{time.time():.3f}" if heartbeat else ""))
                case EndDrive(mower):
                    self._tasks.spawn(self._end_drive(mower))
                case ScheduleDriveCheck(delay_s, token):
                    asyncio.get_running_loop().call_later(
                        delay_s, self._tell, mower_id, DriveCheck(token)
                    )
                case PublishLink(registration, up, reason):
                    self._metrics.connected.inc() if up else self._metrics.connected.dec()
                    event = EventEnvelope.new(
                        "mower.connected" if up else "mower.disconnected",
                        MowerLink(
                            mower_id=registration.mower_id,
                            reason=None if reason is None else clean_reason(reason, limit=500),
                        ),
                        producer=self._producer,
                        now=self._clock(),
                        account_id=registration.account_id,
                    )
                    self._tasks.spawn(self._publish_event(event))

    def stop_sent_ahead(self, mower_id: uuid.UUID, command_id: uuid.UUID) -> None:
        """The lane is sending a stop its controller has not been told of yet.

        Until the controller's answer to it comes through here, an ordinary send it
        decided is one the stop overtook: it is answered ``rejected`` and never written.
        """
        self._stops_ahead[mower_id] = command_id

    def stop_delivered(self, command_id: uuid.UUID, at: float) -> None:
        """An emergency stop reached the gateway at ``at`` (perf counter); first wins."""
        if command_id not in self._delivered_at:
            self._delivered_at[command_id] = at
            if len(self._delivered_at) > 1024:
                self._delivered_at.popitem(last=False)

    def _enqueue(self, item: CommandResult | tuple[MowerState, str]) -> None:
        self._outgoing.append(item)
        self._wake.set()

    async def _send(self, envelope: CommandEnvelope, epoch: int = 0) -> None:
        if envelope.is_emergency:
            delivered = self._delivered_at.pop(envelope.command_id, None)
            if delivered is not None:
                self._metrics.estop_seconds.observe(time.perf_counter() - delivered)
        elif self._stop_epochs.get(envelope.mower_id, 0) != epoch:
            # A stop went to the device after this send was decided and before it got its
            # turn: the mower must not run a command the stop overtook.
            self._tell(envelope.mower_id, DeviceOutcome(envelope, "rejected", PREEMPTED))
            return
        # Checked again right before sending: the command may have waited in the queue.
        if envelope.is_expired(self._clock()):
            self._tell(envelope.mower_id, DeviceOutcome(envelope, "expired", None))
            return
        conn = self._connections.get(envelope.mower_id)
        if conn is None:
            self._tell(envelope.mower_id, DeviceOutcome(envelope, "failed", "mower not connected"))
            return
        if _debug_enabled():
            log.debug(
                "command sent to mower",
                mower_id=str(envelope.mower_id),
                command_id=str(envelope.command_id),
                kind=envelope.kind,
            )
        try:
            outcome = await conn.send(envelope, timeout=self._device_timeout)
        except LinkDownError as err:
            self._tell(envelope.mower_id, DeviceOutcome(envelope, "failed", f"link down: {err}"))
        except LinkLostError as err:
            self._tell(envelope.mower_id, DeviceOutcome(envelope, "failed", str(err)))
        except CommandTimeoutError:
            reason = f"no answer from the mower within {self._device_timeout:g} s"
            self._tell(envelope.mower_id, DeviceOutcome(envelope, "failed", reason))
        except Exception as err:
            log.exception(
                "device send failed",
                mower_id=str(envelope.mower_id),
                command_id=str(envelope.command_id),
            )
            self._tell(
                envelope.mower_id, DeviceOutcome(envelope, "failed", f"gateway error: {err}")
            )
        else:
            if _debug_enabled():
                log.debug(
                    "mower answered",
                    mower_id=str(envelope.mower_id),
                    command_id=str(envelope.command_id),
                    status=outcome.status,
                    reason=outcome.reason,
                )
            self._tell(envelope.mower_id, DeviceOutcome(envelope, outcome.status, outcome.reason))

    async def _end_drive(self, mower_id: uuid.UUID) -> None:
        conn = self._connections.get(mower_id)
        if conn is None or not conn.connected:
            return
        now = self._clock()
        stop = CommandEnvelope.issue(
            mower_id=mower_id,
            account_id=uuid.UUID(int=0),
            command=ManualDrive(linear_mps=0.0, angular_rps=0.0, ttl_ms=100),
            issued_by=f"service:{self._producer}",
            now=now,
        )
        try:
            await conn.send(stop, timeout=self._device_timeout)
            log.info("manual drive ended by the gateway", mower_id=str(mower_id))
        except Exception as err:
            log.warning("could not end manual drive", mower_id=str(mower_id), error=str(err))

    async def _publish(self) -> None:
        # A result whose ack fails, or does not come within ACK_TIMEOUT, is queued again:
        # its msg id `<command_id>:<status>` makes the repeat harmless. A state is
        # published without waiting for the stream's ack (the stream still stores and
        # de-duplicates it): a newer state supersedes a lost one, and an ack that never
        # comes must not hold a slot of the publish window.
        outgoing = self._outgoing
        key = self._keys.key
        jetstream = self._jetstream
        delay = 0.05
        sent = 0
        while True:
            await self._wake.wait()
            self._wake.clear()
            while outgoing:
                item = outgoing[0]
                try:
                    if isinstance(item, CommandResult):
                        ack = await jetstream.result(item)
                    else:
                        state, heartbeat = item
                        stamp = state.observed_at.timestamp()
                        msg_id = f"{key(state.mower_id)}:{stamp:.6f}{heartbeat}"
                        await jetstream.state_unacked(state, msg_id=msg_id)
                except Exception as err:
                    self._metrics.publish_failures.labels("publish").inc()
                    with _about(item):
                        log.warning("publish failed; retrying", error=str(err), retry_in_s=delay)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 2.0)
                    continue
                delay = 0.05
                outgoing.popleft()
                sent += 1
                if sent % 64 == 0:
                    await asyncio.sleep(0)  # a long backlog must not hold the loop
                if isinstance(item, CommandResult):
                    # Failed by the deadline when lost with a reconnect: queued again.
                    ack.add_done_callback(functools.partial(self._result_acked, item))
                else:
                    (self._metrics.heartbeats if item[1] else self._metrics.telemetry).inc()

    def _result_acked(self, result: CommandResult, ack: asyncio.Future[Any]) -> None:
        if ack.cancelled() or ack.exception() is not None:
            self._metrics.publish_failures.labels("result").inc()
            with _about(result):
                log.warning(
                    "result not acknowledged; publishing again",
                    command_id=str(result.command_id),
                    status=result.status,
                )
            asyncio.get_running_loop().call_later(0.2, self._enqueue, result)
            return
        self._metrics.result_status(result.status).inc()
        if result.is_final:
            if self.on_final is not None:
                self.on_final(result.command_id)
            seconds = self.pending.finish(result.command_id)
            if seconds is not None:
                self._metrics.command_seconds.observe(seconds)
        if _debug_enabled():
            log.debug(
                "command result",
                mower_id=str(result.mower_id),
                command_id=str(result.command_id),
                status=result.status,
                reason=result.reason,
            )

    async def _publish_event(self, event: EventEnvelope[Any]) -> None:
        delay = 0.05
        for _ in range(8):
            try:
                await (await self._jetstream.event(event))
                return
            except Exception as err:
                self._metrics.publish_failures.labels("event").inc()
                log.warning("event publish failed", type=event.type, error=str(err))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)

    async def settle(self, timeout: float) -> None:
        """Wait for the effect tasks started so far (device sends, publishes)."""
        await self._tasks.wait(timeout)
        deadline = time.monotonic() + timeout
        while self._outgoing and time.monotonic() < deadline:  # noqa: ASYNC110 - no "empty" event
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        """Cancel what is left."""
        self._tasks.cancel()
        if self._publisher is not None:
            await cancel_and_wait(self._publisher, name="results publisher")
        await self._jetstream.stop()
        await self._tasks.finish()


def _debug_enabled() -> bool:
    return _stdlog.isEnabledFor(logging.DEBUG)


def _about(item: CommandResult | tuple[MowerState, str]) -> AbstractContextManager[None]:
    # The mower (and command) a result or state being published is about, for the lines
    # of its failures.
    if isinstance(item, CommandResult):
        return bound(mower_id=item.mower_id, command_id=item.command_id)
    state = item[0]
    return bound(mower_id=state.mower_id, account_id=state.account_id)
