"""The mower controller's decisions: a pure state machine that returns effects, no I/O.

One controller per mower. Ordinary commands run one at a time in arrival order; an
emergency stop goes to the device at once, even while an ordinary command is in flight,
and answers every ordinary command it overtook as ``rejected``. Stream sequences decide
what was "before" the stop: an ordinary command published before it that reaches the
controller after it (a redelivery, a slow admission) is rejected too, so a queued start
never runs after a stop.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import msgspec

from contracts.v1 import (
    CommandEnvelope,
    CommandResult,
    CommandStatus,
    ManualDrive,
    MowerRegistration,
    MowerState,
    ResumeMow,
    ReturnToDock,
    StartMow,
)
from mowdeck.gateway.memory import CommandMemory

__all__ = [
    "PREEMPTED",
    "Controller",
    "Effect",
    "EndDrive",
    "PublishLink",
    "PublishResult",
    "PublishState",
    "ScheduleDriveCheck",
    "SendToDevice",
    "clean_reason",
    "result_effect",
]

PREEMPTED = "preempted by emergency_stop"
# Commands that take a mower out of manual drive once it executed them.
_LEAVES_DRIVE = (StartMow, ResumeMow, ReturnToDock)
# A mower's command ids are remembered as the shard's are (``memory``), and at most
# SEEN_LIMIT of them: a memory by count alone would hold every mower's last thousand ids,
# 80 KB a mower, for good.
SEEN_LIMIT = 1024


@dataclass(frozen=True, slots=True)
class SendToDevice:
    """Send a command to the mower and report its outcome back."""

    envelope: CommandEnvelope


@dataclass(frozen=True, slots=True)
class EndDrive:
    """Stop a manual drive session on the device (the gateway's own dead-man)."""

    mower_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class PublishResult:
    """Publish a command status transition.

    ``admitted_at`` (an ``accepted`` result only): when the gateway admitted the command,
    on the loop's performance counter, for the admission-to-result latency.
    """

    result: CommandResult
    admitted_at: float | None = None


@dataclass(frozen=True, slots=True)
class PublishState:
    """Publish a state on ``telemetry.mower.<id>``."""

    state: MowerState
    heartbeat: bool


@dataclass(frozen=True, slots=True)
class PublishLink:
    """Publish ``mower.connected`` or ``mower.disconnected``."""

    registration: MowerRegistration
    up: bool
    reason: str | None


@dataclass(frozen=True, slots=True)
class ScheduleDriveCheck:
    """Ask to be told ``drive_check(token)`` after ``delay_s`` seconds."""

    delay_s: float
    token: int


Effect = SendToDevice | EndDrive | PublishResult | PublishState | PublishLink | ScheduleDriveCheck


@dataclass(slots=True)
class _Queued:
    envelope: CommandEnvelope
    sequence: int


class Controller:
    """What one mower's controller knows and decides."""

    def __init__(self, registration: MowerRegistration) -> None:
        self.registration = registration
        self.connected = False
        # A list, not a deque: a mower's queue is short, and an empty deque costs 760 bytes
        # against a list's 56, in every one of a shard's thousands of controllers.
        self._queue: list[_Queued] = []
        self._in_flight: CommandEnvelope | None = None
        self._emergency_in_flight: set[uuid.UUID] = set()
        self._seen = CommandMemory(limit=SEEN_LIMIT)
        self._estop_sequence = 0
        self._fast_stops: dict[uuid.UUID, datetime] = {}
        self._drive_token = 0
        self._driving = False
        self._latest: MowerState | None = None
        self._published: tuple[object, ...] | None = None

    # Commands.

    def submit(
        self,
        envelope: CommandEnvelope,
        sequence: int,
        now: datetime,
        admitted_at: float | None = None,
    ) -> list[Effect]:
        """An admitted ordinary command (``admitted_at``: see ``PublishResult``)."""
        if self._seen.remember(envelope, now):
            return []
        effects: list[Effect] = [result_effect(envelope, "accepted", now, admitted_at=admitted_at)]
        if self._preempted(sequence, now):
            effects.append(result_effect(envelope, "rejected", now, PREEMPTED))
            return effects
        self._queue.append(_Queued(envelope, sequence))
        if self._in_flight is None:
            effects += self._next(now)
        elif self._driving and isinstance(envelope.command, ManualDrive):
            # The operator is still driving: the dead-man counts from this command's
            # arrival, not from when the one ahead of it is answered.
            effects.append(self._arm_drive(envelope.command.ttl_ms))
        return effects

    def emergency(
        self,
        envelope: CommandEnvelope,
        sequence: int | None,
        now: datetime,
        *,
        sent: bool = False,
        answered: bool = False,
        admitted_at: float | None = None,
    ) -> list[Effect]:
        """An admitted emergency stop: to the device now; overtaken commands are rejected.

        ``sequence`` is None when the stop came by the emergency lane (a core subscription
        that sees it as it is published, ahead of the stream's backlog). Until its stream copy
        arrives, every ordinary command the stream delivers was published before it, so
        each is rejected; the stream copy then sets the boundary by sequence.

        ``sent``: the emergency lane already handed the stop to the device (admission
        passed, so sending is the only possible decision); its outcome comes back as usual.

        ``answered``: the stream copy of a stop whose final result an earlier process of
        the shard stored (it sent the stop, by its lane, and stopped before the stream
        delivered the copy). It is not sent again and gets no result: it only sets the
        boundary, so the ordinary commands published before it are not run after it.
        """
        cid = envelope.command_id
        if self._seen.remember(envelope, now) or answered:
            if sequence is not None:  # the stream copy of a stop the lane brought
                self._estop_sequence = max(self._estop_sequence, sequence)
                self._fast_stops.pop(cid, None)
            return self._reject_overtaken(now) if answered else []
        effects: list[Effect] = [result_effect(envelope, "accepted", now, admitted_at=admitted_at)]
        if sequence is None:
            self._fast_stops[cid] = envelope.expires_at
        else:
            self._estop_sequence = max(self._estop_sequence, sequence)
        if envelope.is_expired(now) and not sent:
            effects.append(result_effect(envelope, "expired", now))
        else:
            self._emergency_in_flight.add(envelope.command_id)
            if not sent:
                effects.insert(0, SendToDevice(envelope))
        # The device stops on its own; the gateway's drive session ends with it.
        self._driving = False
        self._drive_token += 1
        return effects + self._reject_overtaken(now, lane=sequence is None)

    def _reject_overtaken(self, now: datetime, *, lane: bool = False) -> list[Effect]:
        # The queued commands a stop overtook: every one while the stop came by the lane
        # alone (all were published before it), else those before its stream sequence.
        effects: list[Effect] = []
        keep: list[_Queued] = []
        for queued in self._queue:
            if lane or queued.sequence < self._estop_sequence:
                effects.append(result_effect(queued.envelope, "rejected", now, PREEMPTED))
            else:
                keep.append(queued)
        self._queue = keep
        return effects

    def _preempted(self, sequence: int, now: datetime) -> bool:
        """True when an ordinary command of this stream sequence was overtaken by a stop."""
        if sequence < self._estop_sequence:
            return True
        if self._fast_stops:
            # A stop whose stream copy never comes (its publish failed) stops blocking
            # ordinary commands when it expires.
            for cid, expires_at in list(self._fast_stops.items()):
                if expires_at <= now:
                    del self._fast_stops[cid]
            return bool(self._fast_stops)
        return False

    def outcome(
        self,
        envelope: CommandEnvelope,
        status: CommandStatus,
        reason: str | None,
        now: datetime,
    ) -> list[Effect]:
        """The device (or the link) answered a command sent earlier."""
        effects: list[Effect] = [result_effect(envelope, status, now, reason)]
        cid = envelope.command_id
        if cid in self._emergency_in_flight:
            self._emergency_in_flight.discard(cid)
            return effects
        if self._in_flight is not None and self._in_flight.command_id == cid:
            self._in_flight = None
            if (
                self._driving
                and status == "executed"
                and isinstance(envelope.command, _LEAVES_DRIVE)
            ):
                # The mower left manual drive (to mow or to dock): the session's timer must
                # not stop it later. Anything else (a blade height, a failed dock) leaves the
                # session, and the gateway's dead-man, as they were.
                self._driving = False
                self._drive_token += 1
            effects += self._next(now)
        return effects

    def _next(self, now: datetime) -> list[Effect]:
        effects: list[Effect] = []
        while self._queue and self._in_flight is None:
            queued = self._queue.pop(0)
            env = queued.envelope
            if self._preempted(queued.sequence, now):
                effects.append(result_effect(env, "rejected", now, PREEMPTED))
            elif env.is_expired(now):
                effects.append(result_effect(env, "expired", now))
            else:
                self._in_flight = env
                effects.append(SendToDevice(env))
                if isinstance(env.command, ManualDrive):
                    effects.append(self._arm_drive(env.command.ttl_ms))
        return effects

    def _arm_drive(self, ttl_ms: int) -> ScheduleDriveCheck:
        self._driving = True
        self._drive_token += 1
        return ScheduleDriveCheck(ttl_ms / 1000.0, self._drive_token)

    def drive_check(self, token: int) -> list[Effect]:
        """The dead-man timer of a manual drive fired."""
        if not self._driving or token != self._drive_token:
            return []  # a newer drive command re-armed it, or the session already ended
        self._driving = False
        return [EndDrive(self.registration.mower_id)]

    @property
    def busy(self) -> bool:
        """True while a command is queued or in flight."""
        return bool(self._queue or self._in_flight or self._emergency_in_flight)

    # States and links.

    def state(self, state: MowerState) -> list[Effect]:
        """A state from the device: publish it when anything significant changed."""
        if state.account_id != self.registration.account_id:
            # The registration, not the device, says which account owns the mower.
            state = msgspec.structs.replace(state, account_id=self.registration.account_id)
        self._latest = state
        significant = state.significant()
        if significant == self._published:
            return []
        self._published = significant
        return [PublishState(state, heartbeat=False)]

    def heartbeat(self) -> list[Effect]:
        """Republish the latest state."""
        if self._latest is None:
            return []
        return [PublishState(self._latest, heartbeat=True)]

    def link(self, up: bool, reason: str | None) -> list[Effect]:
        """The link came up or went down."""
        if up == self.connected:
            return []
        self.connected = up
        if not up:
            self._published = None  # republish the first state after a reconnect
        return [PublishLink(self.registration, up, reason)]

    def rename(self, registration: MowerRegistration) -> None:
        """Fleet renamed the mower (same connection)."""
        self.registration = registration

    def close(self, now: datetime, reason: str) -> list[Effect]:
        """The controller is closing: end a drive, answer what is queued, report the link."""
        effects: list[Effect] = []
        if self._driving:
            self._driving = False
            effects.append(EndDrive(self.registration.mower_id))
        for queued in self._queue:
            effects.append(result_effect(queued.envelope, "rejected", now, reason))
        self._queue.clear()
        if self.connected:
            self.connected = False
            effects.append(PublishLink(self.registration, False, reason))
        return effects


REASON_MAX = 1000  # CommandResult.reason's limit in the v1 contract


def result_effect(
    envelope: CommandEnvelope,
    status: CommandStatus,
    now: datetime,
    reason: str | None = None,
    *,
    admitted_at: float | None = None,
) -> PublishResult:
    """The effect that publishes one status transition of ``envelope``."""
    return PublishResult(
        CommandResult(
            command_id=envelope.command_id,
            mower_id=envelope.mower_id,
            status=status,
            at=now,
            reason=None if reason is None else clean_reason(reason),
            kind=envelope.kind,
        ),
        admitted_at,
    )


def clean_reason(reason: str, *, limit: int = REASON_MAX) -> str:
    """A reason as every consumer can decode and store it.

    Reasons come from devices and from errors: a constructed ``CommandResult`` is not
    checked against the contract's limits, so an over-long reason would be refused by
    every consumer's decoder (and the result lost), and a NUL character by every
    database. Cut to ``limit`` characters (the contract's: 1,000 for a result, 500 for a
    link event); NUL becomes U+FFFD.
    """
    if "\x00" in reason:
        reason = reason.replace("\x00", "\ufffd")
    if not reason.isascii():
        # A lone surrogate (from a device's bytes decoded with surrogateescape) cannot be
        # encoded at all: it would stop the publisher.
        reason = reason.encode("utf-8", "replace").decode("utf-8")
    if len(reason) > limit:
        reason = reason[: limit - 1] + "\u2026"
    return reason
