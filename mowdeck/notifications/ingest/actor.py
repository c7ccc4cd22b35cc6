"""The watch actor: one per mower, holding its ``MowerWatch`` and running the rules on it.

It does no I/O. The state batcher sends it a mower's states of one batch (``Evaluate``);
it answers through a ``PlanSink`` that wakes the loop once every mower of the batch has
answered. The answer carries the watch it evaluated against, so the transaction can tell
whether the stored (locked) watch is still that one; when it is not (another replica, the
offline scan or a link event wrote it), the state batcher plans again on the stored watch and
hands the actor the result (``Adopt``). After a failed commit the actor is stopped, so it
restarts from the stored watch, its snapshot.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec
import pykka

from actors import (
    ActorFactory,
    ActorMetrics,
    AnswerSink,
    Dispatcher,
    DispatcherActor,
    PrefetchedSnapshots,
    ShardSupervisor,
    Snapshot,
    snapshots_by_id,
)
from contracts.v1 import MowerState
from mowdeck.notifications.ingest.plan import Place, Plan, contact_only, plan_mower
from mowdeck.notifications.ingest.ports import WatchStore
from mowdeck.notifications.rules.evaluate import Thresholds
from mowdeck.notifications.rules.watch import MowerWatch, decode_watch, encode_watch

__all__ = [
    "Adopt",
    "Evaluate",
    "PlanSink",
    "WatchActor",
    "WatchActors",
    "WatchAnswer",
    "WatchSnapshots",
    "actor_factory",
    "evaluate",
]


class WatchAnswer(msgspec.Struct, frozen=True):
    """A mower's answer: the watch it evaluated against, the plan of its states, the
    watch after them, and whether the plan only moved the watch's contact (a heartbeat,
    which the batch may store as a touch: ``plan.contact_only``)."""

    base: MowerWatch | None
    plan: Plan
    watch: MowerWatch | None
    contact_only: bool = False


PlanSink = AnswerSink[uuid.UUID, WatchAnswer]
"""Where the actors of one batch deliver their answers (``actors.AnswerSink``)."""


class Evaluate(msgspec.Struct, frozen=True):
    """Run the rules over a mower's states of one batch, in arrival order."""

    states: Sequence[MowerState]
    now: datetime
    consuming_since: datetime | None
    sink: PlanSink


@dataclass(frozen=True, slots=True)
class Adopt:
    """Replace the watch with what was committed."""

    watch: MowerWatch | None


class WatchActor(DispatcherActor):
    """Holds one mower's watch and applies the rules to its states."""

    def __init__(
        self,
        *,
        dispatcher: Dispatcher,
        mower_id: uuid.UUID,
        watch: MowerWatch | None,
        thresholds: Thresholds,
        place: Place | None = None,
    ) -> None:
        super().__init__(dispatcher=dispatcher)
        self.mower_id = mower_id
        self.watch = watch
        self.thresholds = thresholds
        self.place = place

    def on_receive(self, message: Any) -> Any:
        """Handle ``Evaluate`` and ``Adopt``."""
        if isinstance(message, Evaluate):
            base = self.watch
            try:
                plan = evaluate(
                    base,
                    states=message.states,
                    now=message.now,
                    consuming_since=message.consuming_since,
                    thresholds=self.thresholds,
                    place=self.place,
                )
            except Exception:
                message.sink.deliver(self.mower_id, None)
                raise
            after = plan.writes[-1].watch if plan.writes else base
            self.watch = after
            answer = WatchAnswer(base, plan, after, contact_only(base, plan))
            message.sink.deliver(self.mower_id, answer)
            return None
        if isinstance(message, Adopt):
            self.watch = message.watch
            return None
        return super().on_receive(message)


def evaluate(
    base: MowerWatch | None,
    *,
    states: Sequence[MowerState],
    now: datetime,
    consuming_since: datetime | None,
    thresholds: Thresholds,
    place: Place | None = None,
) -> Plan:
    """The plan of one mower's states against ``base`` (also used to plan again)."""
    return plan_mower(base, states, now, thresholds, consuming_since, place=place)


class WatchSnapshots(PrefetchedSnapshots):
    """Snapshots read from ``notification_watches``: written with each batch, never here.

    ``prefetch`` (of ``actors.PrefetchedSnapshots``) loads the watches of many mowers in
    one query before their actors start.
    """

    def __init__(self, store: WatchStore) -> None:
        super().__init__(snapshots_by_id(store.read_watches, encode_watch))


def actor_factory(
    dispatcher: Dispatcher, thresholds: Thresholds, place: Place | None = None
) -> ActorFactory:
    """The supervisor's factory: a ``WatchActor`` from the mower's snapshot."""

    def factory(key: str, snapshot: Snapshot | None) -> pykka.ActorRef[Any]:
        watch = None if snapshot is None else decode_watch(snapshot.state)
        return WatchActor.start(
            dispatcher=dispatcher,
            mower_id=uuid.UUID(key),
            watch=watch,
            thresholds=thresholds,
            place=place,
        )

    return factory


class WatchActors:
    """The worker threads and the supervisor of one ``WatchActor`` per mower."""

    def __init__(
        self,
        store: WatchStore,
        *,
        workers: int,
        thresholds: Thresholds,
        metrics: ActorMetrics | None = None,
        place: Place | None = None,
    ) -> None:
        """``place`` finds where a state lies against its site's areas (``Geofences``)."""
        self.place = place
        self.dispatcher = Dispatcher(workers=workers, name="notifications", metrics=metrics)
        self.snapshots = WatchSnapshots(store)
        self.supervisor = ShardSupervisor(
            self.dispatcher,
            actor_factory(self.dispatcher, thresholds, place),
            self.snapshots,
            metrics=metrics,
        )

    def start(self) -> None:
        """Start the worker threads."""
        self.dispatcher.start()

    async def stop(self) -> None:
        """Stop every actor, then the worker threads."""
        await self.supervisor.stop_all()
        await asyncio.to_thread(self.dispatcher.stop)

    async def forget(self, mower_id: uuid.UUID) -> None:
        """Stop the mower's actor: a removed mower's next state starts afresh."""
        await self.supervisor.stop(str(mower_id))
