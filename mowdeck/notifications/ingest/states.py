"""The state pipeline: micro-batches of states, evaluated by per-mower actors, one commit.

Per batch: decode (malformed payloads and subjects naming another mower are terminated,
other TELEMETRY subjects acknowledged unread), ask each mower's ``WatchActor`` to run
the rules, then one transaction (``statebatch.StateBatchWriter``) locks the batch's
watches FOR UPDATE (in mower id order), plans again on the stored watch every mower
whose actor evaluated against another one (another replica, the offline scan or a link
event wrote it meanwhile), touches the heartbeats, writes the other watches and the
pending events, commits, and only then the batch is acknowledged. The next batch is
decoded and evaluated while this one commits. A batch that fails is nak'd whole and its
actors are stopped, so they restart from the stored watches.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import structlog
from nats.aio.msg import Msg

from actors import BatchAsk, LoopBridge, ShardSupervisor
from mowdeck.kit.batching import BatchLoop, nak_all
from mowdeck.kit.state_batches import MowerStates, StateSorter
from mowdeck.kit.wire import ack_all
from mowdeck.notifications.errors import StoreConflictError
from mowdeck.notifications.ingest.actor import (
    Adopt,
    Evaluate,
    PlanSink,
    WatchAnswer,
    WatchSnapshots,
)
from mowdeck.notifications.ingest.plan import Plan
from mowdeck.notifications.ingest.ports import WatchStore
from mowdeck.notifications.ingest.statebatch import StateBatchWriter
from mowdeck.notifications.metrics import NotificationsMetrics
from mowdeck.notifications.rules.evaluate import Thresholds
from mowdeck.notifications.rules.watch import MowerWatch

__all__ = ["STATES_DURABLE", "StatePipeline", "count_plan", "transact"]

STATES_DURABLE = "notifications-states"
"""The states' durable consumer: the whole TELEMETRY stream, as Telemetry reads it (a
filter narrower than the stream's subjects costs JetStream about twice the CPU per
delivery; the pipeline acknowledges whatever is not telemetry.mower.<id>), read on the
connection's read loop (a ``DirectConsumer``: the pipeline's ``take`` only queues)."""

log = structlog.get_logger("mowdeck.notifications.ingest.states")
_EVALUATE_TIMEOUT = 10.0
_NAK_DELAY = 1.0
_CONFLICT_ATTEMPTS = 3


@dataclass(slots=True)
class _Prepared:
    mowers: dict[uuid.UUID, MowerStates]
    answers: dict[uuid.UUID, WatchAnswer]
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


async def transact(
    store: WatchStore,
    ids: Sequence[uuid.UUID],
    planner: Callable[[dict[uuid.UUID, MowerWatch]], Plan],
) -> Plan:
    """Lock the watches of ``ids``, plan on them, write, commit; again after a lost race."""
    attempt = 1
    while True:
        try:
            async with store.watches() as tx:
                plan = planner(await tx.lock(ids))
                await tx.write(plan.writes, plan.events)
            return plan
        except StoreConflictError as err:
            if attempt == _CONFLICT_ATTEMPTS:
                raise
            log.info("watch transaction lost a race; trying again", attempt=attempt, error=str(err))
            attempt += 1


class StatePipeline:
    """Collects state messages and runs them through actors and one commit per batch."""

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
    ) -> None:
        """``on_actors_started(count)`` is told of every batch that started actors."""
        self._store = store
        self._supervisor = supervisor
        self._thresholds = thresholds
        self._metrics = metrics
        self._consuming_since = consuming_since
        self._clock = clock
        self._on_events = on_events
        self._loop: BatchLoop[_Prepared] = BatchLoop(
            prepare=self._prepare,
            commit=self._commit,
            batch_max=batch_max,
            linger=linger,
            overlap=True,
            nak_delay=_NAK_DELAY,
            name="notifications-states",
        )
        self.take = self._loop.take  # the states consumer's callback (a DirectConsumer)
        self._writer = StateBatchWriter(store, thresholds)
        self._sorter = StateSorter()
        self._key = self._sorter.key
        # One query for every new mower's watch, then all actors start together; a new
        # actor holds what it reads now, whatever this replica wrote before.
        self._ask: BatchAsk[uuid.UUID, WatchAnswer] = BatchAsk(
            supervisor,
            bridge,
            key=self._key,
            snapshots=snapshots,
            timeout=_EVALUATE_TIMEOUT,
            on_starting=self._writer.forget,
            on_started=None if on_actors_started is None else _counted(on_actors_started),
            name="watch",
        )

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The batching task."""
        return self._loop.task

    def start(self) -> None:
        """Start the batching task (``take`` is the consumer's callback)."""
        self._loop.start()

    async def stop(self) -> None:
        """Finish the queued messages, then stop."""
        await self._loop.stop()

    async def _prepare(self, msgs: list[Msg]) -> _Prepared | None:
        batch = self._sorter.sort(msgs)
        for rejected in batch.rejected:
            await _term(rejected.msg, rejected.reason, rejected.detail)
        if batch.foreign:
            # The consumer reads the whole stream (STATES_DURABLE); these are not states.
            await ack_all(batch.foreign)
        mowers = batch.mowers
        if not mowers:
            return None
        now, since = self._clock(), self._consuming_since()
        answers = await self._evaluate(mowers, now, since)
        decided: dict[uuid.UUID, WatchAnswer] = {}
        for mower_id, answer in answers.items():
            if answer is None:
                await nak_all(mowers.pop(mower_id).msgs, _NAK_DELAY)
            else:
                decided[mower_id] = answer
        return _Prepared(mowers, decided, now, since) if mowers else None

    async def _evaluate(
        self, mowers: dict[uuid.UUID, MowerStates], now: datetime, since: datetime | None
    ) -> dict[uuid.UUID, WatchAnswer | None]:
        def question(entry: MowerStates, sink: PlanSink) -> Evaluate:
            return Evaluate(entry.states, now, since, sink)

        return await self._ask.ask(mowers, question)

    async def _commit(self, prepared: _Prepared) -> None:
        mowers = prepared.mowers
        msgs = [m for e in mowers.values() for m in e.msgs]
        started = time.perf_counter()
        try:
            result = await self._writer.commit(
                prepared.answers,
                {m: e.states for m, e in mowers.items()},
                prepared.now,
                prepared.consuming_since,
            )
        except Exception:
            log.exception("state batch failed; redelivering", mowers=len(mowers))
            # The actors evaluated against watches that were never committed: restart
            # them from the stored ones, and let JetStream redeliver the whole batch.
            await asyncio.gather(*(self._supervisor.stop(self._key(m)) for m in mowers))
            await nak_all(msgs, _NAK_DELAY)
            return
        metrics = self._metrics
        metrics.commit_seconds.labels(source="states").observe(time.perf_counter() - started)
        metrics.states_evaluated.inc(len(msgs))
        metrics.watches_written.labels(source="contact").inc(len(result.touched))
        count_plan(metrics, result.plan, "states")
        for mower_id, watch in result.replanned.items():
            ref = self._supervisor.get(self._key(mower_id))
            if ref is not None:
                ref.tell(Adopt(watch))
        await ack_all(msgs)
        if result.plan.events:
            self._on_events()


def _counted(told: Callable[[int], object]) -> Callable[[list[uuid.UUID]], object]:
    def started(mowers: list[uuid.UUID]) -> object:
        return told(len(mowers))

    return started


async def _term(msg: Msg, reason: str, detail: str) -> None:
    log.warning("state terminated", reason=reason, subject=msg.subject, detail=detail)
    try:
        await msg.term()
    except Exception as err:
        log.debug("term failed", error=str(err))
