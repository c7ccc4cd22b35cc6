"""The states: Notifications' steps of the kit's actor batch (``kit/actor_batch.py``).

Per batch: each mower's ``WatchActor`` runs the rules on its states, then one
transaction (``statebatch.StateBatchWriter``) locks the batch's watches FOR UPDATE (in
mower id order), plans again on the stored watch every mower whose actor evaluated
against another one (another replica, the offline scan or a link event wrote it
meanwhile), touches the heartbeats, writes the other watches and the pending events. The
sorting, what happens when the transaction fails, loses a race or is refused (split by
mowers), and the acknowledgements are the kit's.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import NamedTuple, cast

from actors import AnswerSink, LoopBridge, ShardSupervisor
from contracts.v1 import MowerState
from mowdeck.kit.actor_batch import ActorBatch, Committed, retry_lost_races
from mowdeck.kit.state_batches import MowerStates, SortedStates
from mowdeck.notifications.errors import StoreConflictError, StoreRejectedError
from mowdeck.notifications.ingest.actor import Adopt, Evaluate, WatchAnswer, WatchSnapshots
from mowdeck.notifications.ingest.plan import Place, Plan
from mowdeck.notifications.ingest.ports import WatchStore
from mowdeck.notifications.ingest.statebatch import BatchResult, StateBatchWriter
from mowdeck.notifications.metrics import NotificationsMetrics
from mowdeck.notifications.rules.evaluate import Thresholds
from mowdeck.notifications.rules.watch import MowerWatch

__all__ = ["STATES_DURABLE", "StateBatcher", "count_plan", "transact"]

STATES_DURABLE = "notifications-states"
"""The states' durable consumer: the whole TELEMETRY stream, as Telemetry reads it (a
filter narrower than the stream's subjects costs JetStream about twice the CPU per
delivery; the batcher acknowledges whatever is not telemetry.mower.<id>), read on the
connection's read loop (a ``DirectConsumer``: the batcher's ``take`` only queues)."""


class Moment(NamedTuple):
    """What a batch is evaluated under: the time, and since when this replica consumes."""

    now: datetime
    consuming_since: datetime | None


def count_plan(metrics: NotificationsMetrics, plan: Plan, source: str) -> None:
    """Count what a committed plan wrote, decided and suppressed."""
    metrics.watches_written.labels(source=source).inc(len(plan.writes))
    for event in plan.events:
        metrics.events.labels(kind=event.kind).inc()
    for suppressed in plan.suppressed:
        metrics.suppressed.labels(reason=suppressed.reason).inc()
    for reason, count in plan.ignored.items():
        metrics.states_ignored.labels(reason=reason).inc(count)
    for change in plan.alarms:
        metrics.alarm_changes.labels(change=change.change, kind=change.kind).inc()
        if change.raised_at is not None:
            cleared_after = (change.at - change.raised_at).total_seconds()
            metrics.alarm_clear_seconds.labels(kind=change.kind).observe(cleared_after)


async def transact(
    store: WatchStore,
    ids: Sequence[uuid.UUID],
    planner: Callable[[dict[uuid.UUID, MowerWatch]], Plan],
) -> Plan:
    """Lock the watches of ``ids``, plan on them, write, commit; again after a lost race."""

    async def once() -> Plan:
        async with store.watches() as tx:
            plan = planner(await tx.lock(ids))
            await tx.write(plan.writes, plan.events, plan.alarms)
        return plan

    return await retry_lost_races(
        once, conflict=StoreConflictError, event="watch transaction lost a race; trying again"
    )


class StateBatcher(ActorBatch[WatchAnswer, Moment, BatchResult]):
    """Notifications' actor batch: the rules in each mower's actor, one commit per batch."""

    def __init__(
        self,
        store: WatchStore,
        *,
        supervisor: ShardSupervisor,
        snapshots: WatchSnapshots,
        bridge: LoopBridge,
        thresholds: Thresholds,
        metrics: NotificationsMetrics,
        consuming_since: Callable[[], datetime | None],
        clock: Callable[[], datetime],
        on_events: Callable[[], object],
        batch_max: int,
        linger: float,
        on_actors_started: Callable[[int], object] | None = None,
        place: Place | None = None,
    ) -> None:
        """``on_actors_started(count)`` is told of every batch that started actors;
        ``place`` finds where a state lies against its site's areas (``Geofences``)."""
        # Made first: a new actor (``forget``, below) holds what it reads now, whatever
        # this replica wrote before.
        self._writer = StateBatchWriter(store, thresholds, place)
        super().__init__(
            name="notifications-states",
            supervisor=supervisor,
            bridge=bridge,
            snapshots=snapshots,
            metrics=metrics.actor_batch,
            conflict=StoreConflictError,
            refused=StoreRejectedError,
            batch_max=batch_max,
            linger=linger,
            on_actors_started=on_actors_started,
        )
        self._metrics = metrics
        self._consuming_since = consuming_since
        self._clock = clock
        self._on_events = on_events
        self._refused_states = metrics.states_ignored.labels(reason="rejected-by-store")

    # -- the steps ------------------------------------------------------------------------

    def context(self) -> Moment:
        """Now, and since when this replica consumes states."""
        return Moment(self._clock(), self._consuming_since())

    def check(self, context: Moment) -> None:
        """No checks of its own beyond the kit's."""
        del context

    def sorted(self, batch: SortedStates) -> None:
        """Nothing to count: the kit logs what it terminates."""
        del batch

    def question(
        self, entry: MowerStates, sink: AnswerSink[uuid.UUID, WatchAnswer], context: Moment
    ) -> Evaluate:
        """``Evaluate`` the mower's states under the batch's moment."""
        return Evaluate(entry.states, context.now, context.consuming_since, sink)

    async def write(
        self,
        mowers: Mapping[uuid.UUID, MowerStates],
        answers: Mapping[uuid.UUID, WatchAnswer],
        context: Moment,
    ) -> Committed[BatchResult]:
        """The watch transaction of the batch (``statebatch``)."""
        states = {m: e.states for m, e in mowers.items()}
        result = await self._writer.commit(answers, states, context.now, context.consuming_since)
        return Committed(result, adopt=result.replanned)

    def adopt(self, memory: object) -> Adopt:
        """Adopt the watch the transaction planned on (None: none stored)."""
        return Adopt(cast("MowerWatch | None", memory))

    def forget(self, mower_ids: Sequence[uuid.UUID]) -> None:
        """Their actors may not hold the stored watches: read them in the next batch."""
        self._writer.forget(mower_ids)

    def committed(self, committed: Committed[BatchResult], states: int, seconds: float) -> None:
        """Count what the batch wrote, decided and suppressed; wake the fan-out."""
        result, metrics = committed.result, self._metrics
        metrics.commit_seconds.labels(source="states").observe(seconds)
        metrics.states_evaluated.inc(states)
        metrics.watches_written.labels(source="contact").inc(len(result.touched))
        count_plan(metrics, result.plan, "states")
        if result.plan.events:
            self._on_events()

    def dropped(self, reason: str, state: MowerState) -> None:
        """Count a state the store refused (the transaction itself drops none)."""
        del reason, state
        self._refused_states.inc()
