"""Messages to the mowers' controllers, around their failures and restarts.

The router is where deliveries and controllers meet: it owns the shard's supervisor, hands
every message to the controller of its mower, holds the messages of a controller being
restarted (in order, for its successor), and is told by the supervisor of every failure.
What a failed controller held is then settled here, per mower: its commands are answered
``failed`` (``open_commands.py``), and their deliveries, held until a final result is
stored (``deliveries.py``), are acknowledged with that answer. They are deliberately not
given back for redelivery to the successor: the message that made a controller fail is
among them, and would make its successor fail again until the supervisor gave up on the
mower (docs/gateway.md, amendment 1).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import pykka
import structlog

from actors import (
    ActorMetrics,
    Dispatcher,
    InMemorySnapshotStore,
    ShardSupervisor,
    Snapshot,
    is_emergency,
)
from contracts.v1 import MowerRegistration
from mowdeck.gateway.actor import ControllerActor, EffectHandoff, EmergencySubmit, Submit
from mowdeck.gateway.controller import Effect
from mowdeck.gateway.mower_keys import MowerKeys
from mowdeck.gateway.open_commands import OpenCommands, lost_effects
from mowdeck.kit.background import BackgroundTasks
from mowdeck.kit.logging import bind, bound

__all__ = ["ControllerRouter"]

log = structlog.get_logger("mowdeck.gateway.routing")

Perform = Callable[[uuid.UUID, Sequence[Effect]], None]
UNAVAILABLE = "the mower's controller is unavailable"


class ControllerRouter:
    """The shard's controllers by mower: started, told, held while restarting, settled."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        registrations: Callable[[uuid.UUID], MowerRegistration],
        perform: Perform,
        *,
        loop: asyncio.AbstractEventLoop,
        keys: MowerKeys,
        metrics: ActorMetrics | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        self._registration = registrations
        self._perform_effects = perform
        self._keys = keys
        # What each controller decided, handed from the workers to the loop.
        self.handoff = EffectHandoff(loop, self.perform)
        self.supervisor = ShardSupervisor(
            dispatcher,
            self._make_controller,
            InMemorySnapshotStore(),
            metrics=metrics,
            on_failure=self.controller_failed,
        )
        self._tells: list[tuple[str, pykka.ActorRef[Any], object]] = []
        self._tells_scheduled = False
        self._held: dict[str, list[object]] = {}
        self._held_deliveries = BackgroundTasks()
        self._open = OpenCommands()  # what each controller holds, settled if it fails

    def _make_controller(self, key: str, snapshot: Snapshot | None) -> pykka.ActorRef[Any]:
        # The gateway keeps nothing durable: a controller always starts fresh.
        del snapshot
        return ControllerActor.start(
            dispatcher=self._dispatcher,
            registration=self._registration(uuid.UUID(key)),
            handoff=self.handoff,
        )

    async def start(self, mower_id: uuid.UUID) -> None:
        """Start the controller of a new mower."""
        await self.supervisor.get_or_start(str(mower_id))

    def controller(self, mower_id: uuid.UUID) -> pykka.ActorRef[Any] | None:
        """The mower's running controller, if any."""
        return self.supervisor.get(str(mower_id))

    async def stop(self, mower_id: uuid.UUID) -> None:
        """Stop and forget the mower's controller (after the mail queued for it)."""
        await self.supervisor.stop(str(mower_id))

    def tell(self, mower_id: uuid.UUID, message: object) -> None:
        """Send a message to a mower's controller, if it has one (call on the loop).

        Ordinary messages are handed over once per loop turn: a tell that finds a worker
        idle wakes it, and waking a thread per state or command costs more than handling
        it. Emergency messages are handed over at once.
        """
        key = self._keys.key(mower_id)
        self._open.told(key, message)
        held = self._held.get(key)
        if held is not None:
            held.append(message)  # behind what waits for the restarted controller
            return
        ref = self.supervisor.get(key)
        if ref is None:
            if key in self.supervisor:  # restarting after a failure: keep it for the next
                self._hold(key, message)
            elif key in self.supervisor.given_up():
                self._settle_lost(key, UNAVAILABLE)
            return
        if is_emergency(message):
            self._tell_one(key, ref, message)
            return
        self._tells.append((key, ref, message))
        if not self._tells_scheduled:
            self._tells_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        """Hand over the ordinary messages of this loop turn now."""
        self._tells_scheduled = False
        tells, self._tells = self._tells, []
        for key, ref, message in tells:
            self._tell_one(key, ref, message)

    def _tell_one(self, key: str, ref: pykka.ActorRef[Any], message: object) -> None:
        held = self._held.get(key)
        if held is not None:
            held.append(message)
            return
        try:
            ref.tell(message)
        except pykka.ActorDeadError:
            # The controller failed since it was looked up; the supervisor restarts it.
            self._hold(key, message)

    def perform(self, mower_id: uuid.UUID, effects: Sequence[Effect]) -> None:
        """Perform what a controller decided (the handoff's sink, on the loop)."""
        self._open.performed(self._keys.key(mower_id), effects)
        self._perform_effects(mower_id, effects)

    def controller_failed(self, key: str, error: BaseException, gave_up: bool) -> None:
        """The supervisor's ``on_failure``: settle what the failed controller held."""
        # Its queue and the messages in its inbox are gone. What it decided before is
        # performed first; what was told since waits for its successor (held).
        self.handoff.flush()
        self.flush()  # tells of this turn to the dead controller are held
        if gave_up:  # no successor: everything is settled now, held messages too
            self._settle_lost(key, UNAVAILABLE)
            return
        held = self._held.get(key, ())
        keep = [m.envelope.command_id for m in held if isinstance(m, (Submit, EmergencySubmit))]
        self._settle_lost(key, f"the mower's controller failed ({type(error).__name__})", keep)

    def _settle_lost(self, key: str, reason: str, keep: Sequence[uuid.UUID] = ()) -> None:
        lost = self._open.take(key, keep)
        if not lost:
            return
        with bound(mower_id=key):
            log.error("commands of a failed controller answered", mower=key, commands=len(lost))
            self.perform(lost[0].mower_id, lost_effects(lost, reason, datetime.now(UTC)))

    def _hold(self, key: str, message: object) -> None:
        # Messages for a controller being restarted wait, in order, for the restarted one
        # (an admitted command must still get its result); the other mowers' messages are
        # not held up.
        held = self._held.get(key)
        if held is None:
            held = self._held[key] = []
            self._held_deliveries.spawn(self._deliver_held(key))
        held.append(message)

    async def _deliver_held(self, key: str) -> None:
        bind(mower_id=key)  # this task's lines are about that mower
        try:
            ref = await self.supervisor.get_or_start(key)
        except Exception as err:
            dropped = self._held.pop(key, [])
            log.error(
                "controller unavailable; messages dropped",
                mower=key,
                messages=len(dropped),
                error=repr(err),
            )
            self._settle_lost(key, UNAVAILABLE)
            return
        messages = self._held.pop(key, [])  # with whatever arrived while it restarted
        for message in messages:
            self._tell_one(key, ref, message)

    async def wait_held(self, timeout: float) -> None:
        """Until the messages held for restarting controllers are delivered (or ``timeout``)."""
        await self._held_deliveries.wait(timeout)

    async def stop_all(self) -> None:
        """Stop every controller."""
        await self.supervisor.stop_all()
