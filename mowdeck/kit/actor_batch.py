"""The per-mower actor batch: TELEMETRY states through each mower's actor, one commit.

Telemetry's ingest and Notifications' rules both take the TELEMETRY stream this way, and
what they share is decided here once:

1. The kit's ``BatchLoop`` cuts the deliveries into batches; the next batch is prepared
   while this one commits, and commits stay in order.
2. ``StateSorter`` sorts a batch by mower. A delivery of another subject is acknowledged
   unread; one that does not decode, names another mower than its subject, or fails the
   service's own ``check`` is terminated, its reason logged and counted.
3. Every mower's actor is asked the service's ``question`` (``actors.BatchAsk``: new
   actors start together from one read of their snapshots). A mower whose actor does
   not answer in time has its deliveries redelivered.
4. ``write`` is the service's transaction for the whole batch. One that loses a race
   with another replica (``conflict``) is tried again, up to three times. One whose data
   the store refuses (``refused``, PostgreSQL's class 22) is split by mowers until the
   mower it refuses is alone: that mower's deliveries are terminated and its actor
   restarted, the others commit. Any other failure, or a conflict that outlasts the
   attempts, is logged and counted, the batch's actors are restarted from what is stored
   (they decided against memories that were never committed) and every delivery of the
   batch is redelivered.
5. After the commit: the actors whose mowers were decided again in the transaction adopt
   what was written, the states the transaction dropped are terminated, and the rest is
   acknowledged in one write.

A delivery whose settling fails (the connection dropped meanwhile) is logged and counted,
never swallowed: JetStream redelivers it after its ack wait.
"""

from __future__ import annotations

import abc
import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import structlog
from nats.aio.msg import Msg
from prometheus_client import CollectorRegistry, Counter

from actors import AnswerSink, BatchAsk, LoopBridge, PrefetchedSnapshots, ShardSupervisor
from contracts.v1 import MowerState
from mowdeck.kit.batching import BatchLoop, ack_quietly
from mowdeck.kit.logging import bound
from mowdeck.kit.state_batches import (
    MowerStates,
    Rejected,
    SortedStates,
    StateCheck,
    StateSorter,
)
from mowdeck.kit.wire import ack_all

__all__ = ["ActorBatch", "ActorBatchMetrics", "Committed", "retry_lost_races"]

log = structlog.get_logger("mowdeck.actor_batch")

A = TypeVar("A")  # an actor's answer
C = TypeVar("C")  # what a batch is decided under (the time, say), taken when it is prepared
R = TypeVar("R")  # what the service's transaction returns
T = TypeVar("T")

CONFLICT_ATTEMPTS = 3
NAK_DELAY = 1.0
DECIDE_TIMEOUT = 10.0


async def retry_lost_races(
    transaction: Callable[[], Awaitable[T]],
    *,
    conflict: type[Exception],
    event: str = "batch lost a race; trying again",
    attempts: int = CONFLICT_ATTEMPTS,
) -> T:
    """``transaction()``, tried again while it raises ``conflict`` (rolled back for another
    replica's sake: the same work, done again against what is stored now, goes through),
    ``attempts`` times at most, each retry logged as ``event``; the last conflict raised."""
    attempt = 1
    while True:
        try:
            return await transaction()
        except conflict as err:
            if attempt >= attempts:
                raise
            log.info(event, attempt=attempt, error=str(err))
            attempt += 1


@dataclass(frozen=True, slots=True)
class Committed(Generic[R]):
    """What a batch's transaction wrote (``result``, the service's own), which mowers'
    actors adopt a memory (it was decided again on what is stored), and which states it
    dropped: per mower, the state's position in the batch and why."""

    result: R
    adopt: Mapping[uuid.UUID, object] = field(default_factory=dict)
    drops: Mapping[uuid.UUID, Mapping[int, str]] = field(default_factory=dict)


class ActorBatchMetrics:
    """``mowdeck_<service>_actor_batch_*``: what the actor batch redelivered, split and
    failed to settle, on a registry passed in (what it terminates the service counts)."""

    def __init__(self, registry: CollectorRegistry, *, service: str) -> None:
        self.redelivered = Counter(
            f"mowdeck_{service}_actor_batch_redelivered_total",
            "States given back to JetStream, by why (no-answer, failed, conflict)",
            ["reason"],
            registry=registry,
        )
        self.splits = Counter(
            f"mowdeck_{service}_actor_batch_splits_total",
            "Batches split because the store refused their data",
            registry=registry,
        )
        self.unsettled = Counter(
            f"mowdeck_{service}_actor_batch_unsettled_total",
            "Deliveries whose ack, nak or term failed (JetStream redelivers them)",
            registry=registry,
        )


@dataclass(slots=True)
class _Prepared(Generic[A, C]):
    mowers: dict[uuid.UUID, MowerStates]
    answers: dict[uuid.UUID, A]
    context: C


class ActorBatch(abc.ABC, Generic[A, C, R]):
    """Runs TELEMETRY deliveries through per-mower actors and one commit per batch.

    A service subclasses it with its steps (the abstract methods: its context, check,
    question, transaction and counting); the order of the steps and what happens when one
    fails are this class's.
    """

    def __init__(
        self,
        *,
        name: str,
        supervisor: ShardSupervisor,
        bridge: LoopBridge,
        snapshots: PrefetchedSnapshots | None,
        metrics: ActorBatchMetrics,
        conflict: type[Exception],
        refused: type[Exception],
        batch_max: int,
        linger: float,
        on_actors_started: Callable[[int], object] | None = None,
    ) -> None:
        """``on_actors_started(count)`` is told of every batch that started actors."""
        self._batch_supervisor = supervisor
        self._batch_metrics = metrics
        self._batch_conflict = conflict
        self._batch_refused = refused
        self._batch_loop: BatchLoop[_Prepared[A, C]] = BatchLoop(
            prepare=self._prepare,
            commit=self._commit,
            batch_max=batch_max,
            linger=linger,
            overlap=True,
            nak_delay=NAK_DELAY,
            name=name,
        )
        self.take = self._batch_loop.take  # the states consumer's callback (a DirectConsumer)
        self._batch_sorter = StateSorter()
        self.key = self._batch_sorter.key
        self._batch_ask: BatchAsk[uuid.UUID, A] = BatchAsk(
            supervisor,
            bridge,
            key=self.key,
            snapshots=snapshots,
            timeout=DECIDE_TIMEOUT,
            on_starting=self.forget,
            on_started=None if on_actors_started is None else _counted(on_actors_started),
            name=name,
        )
        self._batch_no_answer = metrics.redelivered.labels(reason="no-answer")
        self._batch_failed = metrics.redelivered.labels(reason="failed")

    # -- the service's steps --------------------------------------------------------------

    @abc.abstractmethod
    def context(self) -> C:
        """What the batch is decided under, taken as it is prepared (the time, say)."""

    @abc.abstractmethod
    def check(self, context: C) -> StateCheck | None:
        """The service's own check of a decoded state, or None."""

    @abc.abstractmethod
    def sorted(self, batch: SortedStates) -> None:
        """Count what a batch held: its states, the rejected (terminated and logged by the
        actor batch), deliveries of other subjects."""

    @abc.abstractmethod
    def question(self, entry: MowerStates, sink: AnswerSink[uuid.UUID, A], context: C) -> object:
        """The message that asks a mower's actor for its answer."""

    @abc.abstractmethod
    async def write(
        self, mowers: Mapping[uuid.UUID, MowerStates], answers: Mapping[uuid.UUID, A], context: C
    ) -> Committed[R]:
        """One transaction for the batch (tried again after a conflict)."""

    @abc.abstractmethod
    def adopt(self, memory: object) -> object:
        """The message that has an actor adopt ``memory``."""

    def forget(self, mower_ids: Sequence[uuid.UUID]) -> None:
        """What is remembered of these mowers' actors may be wrong now (they restart, or
        their batch failed); nothing by default."""

    @abc.abstractmethod
    def committed(self, committed: Committed[R], states: int, seconds: float) -> None:
        """Count a commit of ``states`` states that took ``seconds``."""

    @abc.abstractmethod
    def dropped(self, reason: str, state: MowerState) -> None:
        """Count a state terminated after it was decided (logged here): the transaction
        dropped it, or the store refused it (``rejected-by-store``)."""

    # -- running ------------------------------------------------------------------------

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The batching task."""
        return self._batch_loop.task

    def start(self) -> None:
        """Start the batching task (``take`` is the consumer's callback)."""
        self._batch_loop.start()

    async def stop(self) -> None:
        """Finish the queued deliveries, then stop."""
        await self._batch_loop.stop()

    async def process(self, msgs: Sequence[Msg]) -> list[R]:
        """Run one batch through sort, decide, commit and settle without the batching task
        (tests, benchmarks): what each transaction that committed returned."""
        prepared = await self._prepare(list(msgs))
        if prepared is None:
            return []
        return await self._commit_mowers(prepared.mowers, prepared.answers, prepared.context)

    # -- prepare ------------------------------------------------------------------------

    async def _prepare(self, msgs: list[Msg]) -> _Prepared[A, C] | None:
        context = self.context()
        batch = self._batch_sorter.sort(msgs, self.check(context))
        self.sorted(batch)
        for rejected in batch.rejected:
            await self._reject(rejected)
        if batch.foreign:
            # The consumer reads the whole stream; these are not states.
            await ack_quietly(batch.foreign)
        mowers = batch.mowers
        if not mowers:
            return None

        def question(entry: MowerStates, sink: AnswerSink[uuid.UUID, A]) -> object:
            return self.question(entry, sink, context)

        answers = await self._batch_ask.ask(mowers, question)
        decided: dict[uuid.UUID, A] = {}
        for mower_id, answer in answers.items():
            if answer is None:
                entry = mowers.pop(mower_id)
                self._batch_no_answer.inc(len(entry.msgs))
                await self._nak(entry.msgs)
            else:
                decided[mower_id] = answer
        return _Prepared(mowers, decided, context) if mowers else None

    async def _reject(self, rejected: Rejected) -> None:
        msg, reason = rejected.msg, rejected.reason
        if reason == "subject-mismatch":
            log.warning(
                "state terminated", reason=reason, subject=msg.subject, mower_id=rejected.detail
            )
        else:
            log.warning(
                "state terminated", reason=reason, subject=msg.subject, error=rejected.detail
            )
        await self._term([msg])

    # -- commit -------------------------------------------------------------------------

    async def _commit(self, prepared: _Prepared[A, C]) -> None:
        # The actor batch must outlive any one batch: whatever escapes is logged, and the
        # batch's deliveries not settled yet are redelivered (a committed one is a no-op).
        try:
            await self._commit_mowers(prepared.mowers, prepared.answers, prepared.context)
        except Exception:
            log.exception("batch failed after its commit", mowers=len(prepared.mowers))
            await self._nak([m for e in prepared.mowers.values() for m in e.msgs])

    async def _commit_mowers(
        self, mowers: dict[uuid.UUID, MowerStates], answers: dict[uuid.UUID, A], context: C
    ) -> list[R]:
        started = time.perf_counter()
        try:
            committed = await self._transact(mowers, answers, context)
        except Exception as err:
            if isinstance(err, self._batch_refused):
                return await self._split(mowers, answers, context, err)
            log.exception("batch commit failed; redelivering", mowers=len(mowers))
            await self._restart(list(mowers))
            msgs = [m for e in mowers.values() for m in e.msgs]
            self._batch_failed.inc(len(msgs))
            await self._nak(msgs)
            return []
        count = sum(len(e.msgs) for e in mowers.values())
        self.committed(committed, count, time.perf_counter() - started)
        await self._settle(mowers, committed)
        return [committed.result]

    async def _transact(
        self, mowers: dict[uuid.UUID, MowerStates], answers: dict[uuid.UUID, A], context: C
    ) -> Committed[R]:
        return await retry_lost_races(
            lambda: self.write(mowers, answers, context), conflict=self._batch_conflict
        )

    async def _split(
        self,
        mowers: dict[uuid.UUID, MowerStates],
        answers: dict[uuid.UUID, A],
        context: C,
        err: Exception,
    ) -> list[R]:
        # Redelivering data the store refused would be refused again, for ever, and would
        # take every mower batched with it along. Split until the mower is alone.
        if len(mowers) == 1:
            [(mower_id, entry)] = mowers.items()
            account_id = entry.states[0].account_id if entry.states else None
            with bound(mower_id=mower_id, account_id=account_id):
                log.warning(
                    "states terminated",
                    reason="rejected-by-store",
                    mower_id=str(mower_id),
                    states=len(entry.msgs),
                    error=str(err),
                )
                await self._restart([mower_id])
                for state in entry.states:
                    self.dropped("rejected-by-store", state)
                await self._term(entry.msgs)
            return []
        self._batch_metrics.splits.inc()
        log.info("batch refused by the store, splitting", mowers=len(mowers), error=str(err))
        ids = list(mowers)
        results: list[R] = []
        for part in (ids[: len(ids) // 2], ids[len(ids) // 2 :]):
            results += await self._commit_mowers(
                {m: mowers[m] for m in part}, {m: answers[m] for m in part}, context
            )
        return results

    async def _settle(self, mowers: dict[uuid.UUID, MowerStates], committed: Committed[R]) -> None:
        for mower_id, memory in committed.adopt.items():
            ref = self._batch_supervisor.get(self.key(mower_id))
            if ref is not None:
                ref.tell(self.adopt(memory))
        acks: list[Msg] = []
        drops = committed.drops
        for mower_id, entry in mowers.items():
            dropped = drops.get(mower_id) if drops else None
            if dropped is None:
                acks.extend(entry.msgs)
                continue
            for i, msg in enumerate(entry.msgs):
                if i in dropped:
                    state = entry.states[i]
                    self.dropped(dropped[i], state)
                    log.warning(
                        "state dropped",
                        reason=dropped[i],
                        mower_id=str(state.mower_id),
                        account_id=str(state.account_id),
                    )
                    await self._term([msg])
                else:
                    acks.append(msg)
        try:
            await ack_all(acks)
        except Exception as err:
            self._batch_metrics.unsettled.inc(len(acks))
            log.warning(
                "batch not acknowledged; redelivered later", count=len(acks), error=str(err)
            )

    async def _restart(self, mower_ids: list[uuid.UUID]) -> None:
        # Their actors decided against memories that were never committed: start them
        # again from what is stored.
        self.forget(mower_ids)
        await asyncio.gather(*(self._batch_supervisor.stop(self.key(m)) for m in mower_ids))

    # -- settling -----------------------------------------------------------------------

    async def _term(self, msgs: Sequence[Msg]) -> None:
        for msg in msgs:
            try:
                await msg.term()
            except Exception as err:
                self._batch_metrics.unsettled.inc()
                log.warning("term failed; redelivered later", subject=msg.subject, error=str(err))

    async def _nak(self, msgs: Sequence[Msg]) -> None:
        for msg in msgs:
            try:
                await msg.nak(delay=NAK_DELAY)
            except Exception as err:
                self._batch_metrics.unsettled.inc()
                log.warning("nak failed; redelivered later", subject=msg.subject, error=str(err))


def _counted(told: Callable[[int], object]) -> Callable[[list[uuid.UUID]], object]:
    def started(mowers: list[uuid.UUID]) -> object:
        return told(len(mowers))

    return started
