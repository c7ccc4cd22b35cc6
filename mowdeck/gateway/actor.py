"""The controller actor: one per mower, on the shared dispatcher; effects go to the loop."""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from actors import Dispatcher, DispatcherActor, Emergency
from contracts.v1 import CommandEnvelope, CommandStatus, MowerRegistration, MowerState
from mowdeck.gateway.controller import Controller, Effect

__all__ = [
    "Close",
    "ControllerActor",
    "DeviceOutcome",
    "DriveCheck",
    "EffectHandoff",
    "EffectSink",
    "EmergencySubmit",
    "Heartbeat",
    "LinkChanged",
    "Rename",
    "StateReported",
    "Submit",
]

EffectSink = Callable[[uuid.UUID, Sequence[Effect]], None]
"""Runs on the event loop: performs a controller's effects."""


DRAIN_SLICE = 128


class EffectHandoff:
    """Hands effects from dispatcher workers to the loop, one wake-up per burst.

    ``call_soon_threadsafe`` per decision would write to the loop's self-pipe every time;
    under load the workers decide faster than the loop wakes, so decisions queue here and
    one scheduled drain performs all of them in order.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, sink: EffectSink) -> None:
        self._loop = loop
        self._sink = sink
        self._items: deque[tuple[uuid.UUID, Sequence[Effect]]] = deque()
        self._scheduled = False

    def post(self, mower_id: uuid.UUID, effects: Sequence[Effect]) -> None:
        """Queue effects (any thread); never blocks."""
        # Append first, then check: a drain that already cleared the flag will either see
        # this item or be followed by the drain scheduled here.
        self._items.append((mower_id, effects))
        if not self._scheduled:
            self._scheduled = True
            try:
                self._loop.call_soon_threadsafe(self._drain)
            except RuntimeError:
                self._items.clear()  # the loop is closed: nobody is left to perform them

    def _drain(self) -> None:
        self._scheduled = False
        items = self._items
        # A bounded slice per loop turn: a burst of decisions must not hold the loop
        # (an emergency stop's send waits for the turn to end).
        for _ in range(DRAIN_SLICE):
            if not items:
                return
            mower_id, effects = items.popleft()
            self._sink(mower_id, effects)
        if items and not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._drain)

    def flush(self) -> None:
        """Perform every queued decision now (on the loop; for shutdown's barriers)."""
        items = self._items
        while items:
            mower_id, effects = items.popleft()
            self._sink(mower_id, effects)


@dataclass(frozen=True, slots=True)
class Submit:
    """An admitted ordinary command with its stream sequence and admission time."""

    envelope: CommandEnvelope
    sequence: int
    admitted_at: float | None = None


@dataclass(frozen=True, slots=True)
class EmergencySubmit(Emergency):
    """An admitted emergency stop (sequence None: it came by the lane, ahead of the stream)."""

    envelope: CommandEnvelope
    sequence: int | None
    sent: bool = False
    admitted_at: float | None = None
    answered: bool = False  # answered by an earlier process: sets the boundary only


@dataclass(frozen=True, slots=True)
class DeviceOutcome:
    """What became of a command sent to the device."""

    envelope: CommandEnvelope
    status: CommandStatus
    reason: str | None


@dataclass(frozen=True, slots=True)
class StateReported:
    """A state from the device."""

    state: MowerState


@dataclass(frozen=True, slots=True)
class LinkChanged:
    """The device link went up or down."""

    up: bool
    reason: str | None


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Republish the latest state."""


@dataclass(frozen=True, slots=True)
class DriveCheck:
    """A manual drive's dead-man timer fired."""

    token: int


@dataclass(frozen=True, slots=True)
class Rename:
    """Fleet renamed the mower."""

    registration: MowerRegistration


@dataclass(frozen=True, slots=True)
class Close:
    """The controller closes; asked, so the caller knows its effects were handed over."""

    reason: str


class ControllerActor(DispatcherActor):
    """Holds one mower's ``Controller`` and hands its effects to the loop."""

    def __init__(
        self,
        *,
        dispatcher: Dispatcher,
        registration: MowerRegistration,
        handoff: EffectHandoff,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        super().__init__(dispatcher=dispatcher)
        self.controller = Controller(registration)
        self._mower_id = registration.mower_id
        self._handoff = handoff
        self._clock = clock

    def on_receive(self, message: Any) -> Any:
        """Decide on one message and hand the effects to the loop."""
        controller = self.controller
        match message:
            case StateReported(state):
                effects = controller.state(state)
            case Submit(envelope, sequence, admitted_at):
                effects = controller.submit(envelope, sequence, self._clock(), admitted_at)
            case EmergencySubmit(envelope, sequence, sent, admitted_at, answered):
                effects = controller.emergency(
                    envelope,
                    sequence,
                    self._clock(),
                    sent=sent,
                    answered=answered,
                    admitted_at=admitted_at,
                )
            case DeviceOutcome(envelope, status, reason):
                effects = controller.outcome(envelope, status, reason, self._clock())
            case Heartbeat():
                effects = controller.heartbeat()
            case LinkChanged(up, reason):
                effects = controller.link(up, reason)
            case DriveCheck(token):
                effects = controller.drive_check(token)
            case Rename(registration):
                controller.rename(registration)
                effects = []
            case Close(reason):
                effects = controller.close(self._clock(), reason)
            case _:
                raise TypeError(f"controller got an unknown message {type(message).__name__}")
        if effects:
            self._handoff.post(self._mower_id, effects)
        return None
