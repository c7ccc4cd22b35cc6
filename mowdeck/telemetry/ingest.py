"""State ingest: micro-batches of states, decided by per-mower actors, one commit, then acks.

Per batch: decode (malformed payloads, payloads PostgreSQL cannot store and subjects
naming another mower are terminated),
ask each mower's actor for its decisions, then in one transaction lock the batch's latest
rows FOR UPDATE and read their directory entries, drop states whose account differs,
re-decide a mower from the stored row when another replica moved it, a state was dropped
or the batch before corrected the memory, write one statement per table, commit, and
only then ack. The next batch is decoded and decided while this one commits. A batch
whose data the store refuses is split by mowers until the mower it refuses is alone;
that mower's messages are terminated and the others committed.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog
from nats.aio.msg import Msg

from actors import BatchAsk, LoopBridge, ShardSupervisor
from contracts.v1 import MowerState
from mowdeck.kit.batching import BatchLoop, ack_quietly, nak_all
from mowdeck.kit.logging import bound
from mowdeck.kit.state_batches import MowerStates, StateCheck, StateSorter
from mowdeck.kit.storable import may_hold_nul, nul_field
from mowdeck.kit.wire import ack_all
from mowdeck.telemetry.actor import (
    Adopt,
    Decide,
    FingerprintAnswer,
    LatestRowSnapshots,
)
from mowdeck.telemetry.errors import StoreConflictError, StoreRejectedError
from mowdeck.telemetry.fingerprint import Rules
from mowdeck.telemetry.metrics import TelemetryMetrics
from mowdeck.telemetry.plan import Plan, plan_batch
from mowdeck.telemetry.ports import TelemetryStore, WriteCounts

__all__ = ["StateBatcher"]

log = structlog.get_logger("mowdeck.telemetry.ingest")
_DECIDE_TIMEOUT = 10.0
_NAK_DELAY = 1.0
# A batch that loses a race with another replica (a deadlock) is tried again this often
# before it is given back to JetStream.
_CONFLICT_ATTEMPTS = 3


@dataclass(slots=True)
class _Prepared:
    """A decided batch waiting for its commit."""

    mowers: dict[uuid.UUID, MowerStates]
    outcomes: dict[uuid.UUID, FingerprintAnswer]


class StateBatcher:
    """Collects state messages and runs them through the pipeline, two batches at a time.

    While batch N is in its transaction (PostgreSQL's time, not ours), batch N+1 is
    decoded and decided. Commits stay in order and one at a time. The actors of N+1 may
    have decided against a memory that N then corrected or failed to commit; the commit
    of N+1 re-reads the locked rows and re-decides every mower whose stored row is not
    the memory its actor decided against, so the pipeline never writes a wrong row.
    """

    def __init__(
        self,
        store: TelemetryStore,
        *,
        supervisor: ShardSupervisor,
        snapshots: LatestRowSnapshots,
        bridge: LoopBridge,
        rules: Rules,
        metrics: TelemetryMetrics,
        batch_max: int,
        linger: float,
        on_actors_started: Callable[[int], object] | None = None,
    ) -> None:
        """``on_actors_started(count)`` is told of every batch that started actors."""
        self._store = store
        self._supervisor = supervisor
        self._rules = rules
        self._metrics = metrics
        # The kit's batching loop, with the next batch decided while this one commits.
        self._loop: BatchLoop[_Prepared] = BatchLoop(
            prepare=self._prepare,
            commit=self._commit_or_nak,
            batch_max=batch_max,
            linger=linger,
            overlap=True,
            nak_delay=_NAK_DELAY,
            name="telemetry-batcher",
        )
        self.take = self._loop.take  # the states consumer's callback (a DirectConsumer)
        self._sorter = StateSorter()
        self._key = self._sorter.key
        # One query for every new mower's memory, then all actors start together.
        self._ask: BatchAsk[uuid.UUID, FingerprintAnswer] = BatchAsk(
            supervisor,
            bridge,
            key=self._key,
            snapshots=snapshots,
            timeout=_DECIDE_TIMEOUT,
            on_started=None if on_actors_started is None else _counted(on_actors_started),
            name="fingerprint",
        )
        # Label children bound once: a ``labels()`` lookup per batch and row adds up.
        rows = metrics.rows_written
        self._rows = (
            rows.labels(table="mower_latest"),
            rows.labels(table="mower_history"),
            rows.labels(table="mower_positions"),
        )
        self._rejected = {
            reason: metrics.dropped.labels(reason=reason)
            for reason in ("malformed", "subject-mismatch", "from-the-future")
        }
        self._refused = metrics.dropped.labels(reason="rejected-by-store")

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

    async def process(self, msgs: Sequence[Msg]) -> WriteCounts:
        """Run one batch through decode, decide, commit and settle."""
        prepared = await self._prepare(msgs)
        return WriteCounts() if prepared is None else await self._commit(prepared)

    async def _prepare(self, msgs: Sequence[Msg]) -> _Prepared | None:
        self._metrics.batch_size.observe(len(msgs))
        batch = self._sorter.sort(msgs, self._check())
        mowers, foreign = batch.mowers, batch.foreign
        self._metrics.states_received.inc(len(msgs) - len(foreign))
        for rejected in batch.rejected:
            await self._reject(rejected.msg, rejected.reason, rejected.detail)
        if foreign:
            # The consumer reads the whole stream (see service.py); these are not states.
            self._metrics.foreign_subjects.inc(len(foreign))
            await ack_quietly(foreign)
        if not mowers:
            return None
        outcomes = await self._decide(mowers)
        decided: dict[uuid.UUID, FingerprintAnswer] = {}
        for mower_id, outcome in outcomes.items():
            if outcome is None:
                await nak_all(mowers.pop(mower_id).msgs, _NAK_DELAY)
            else:
                decided[mower_id] = outcome
        return _Prepared(mowers, decided) if mowers else None

    def _check(self) -> StateCheck:
        """This batch's own checks, after the kit's (``kit.state_batches``)."""
        horizon = datetime.now(UTC) + self._rules.max_clock_skew

        def check(state: MowerState, data: bytes) -> tuple[str, str] | None:
            # PostgreSQL refuses a NUL character in text and jsonb, and would fail the whole
            # batch's commit. A byte search per state; the fields only when the escape is there.
            if may_hold_nul(data) and (nul := nul_field(state)) is not None:
                return "malformed", f"{nul} holds a NUL character (\\u0000)"
            if state.observed_at > horizon:
                return (
                    "from-the-future",
                    f"observed_at {state.observed_at.isoformat()} is ahead of this clock",
                )
            return None

        return check

    async def _commit_or_nak(self, prepared: _Prepared) -> WriteCounts:
        # The pipeline must outlive any one batch: whatever escapes the commit is logged,
        # and the batch's messages not yet settled are redelivered (a redelivery of a
        # committed state is a no-op).
        try:
            return await self._commit(prepared)
        except Exception:
            log.exception("batch failed", mowers=len(prepared.mowers))
            await nak_all([m for e in prepared.mowers.values() for m in e.msgs], _NAK_DELAY)
            return WriteCounts()

    async def _commit(self, prepared: _Prepared) -> WriteCounts:
        return await self._commit_mowers(prepared.mowers, prepared.outcomes)

    async def _commit_mowers(
        self, mowers: dict[uuid.UUID, MowerStates], outcomes: dict[uuid.UUID, FingerprintAnswer]
    ) -> WriteCounts:
        states = {m: e.states for m, e in mowers.items()}
        started = time.perf_counter()
        try:
            plan, drops, counts = await self._transact(states, outcomes)
        except StoreRejectedError as err:
            # Redelivering data the store refused would be refused again, forever, and
            # would take every mower batched with it along. Split until the mower is alone.
            if len(mowers) == 1:
                await self._refuse(mowers, err)
                return WriteCounts()
            log.info("batch refused by the store, splitting", mowers=len(mowers), error=str(err))
            ids = list(mowers)
            total = WriteCounts()
            for part in (ids[: len(ids) // 2], ids[len(ids) // 2 :]):
                done = await self._commit_mowers(
                    {m: mowers[m] for m in part}, {m: outcomes[m] for m in part}
                )
                total = _added(total, done)
            return total
        except Exception:
            log.exception("batch commit failed", mowers=len(mowers))
            # The actors decided against memories that were never committed: restart them
            # from the stored rows, and let JetStream redeliver the whole batch.
            await asyncio.gather(*(self._supervisor.stop(self._key(m)) for m in mowers))
            await nak_all([msg for e in mowers.values() for msg in e.msgs], _NAK_DELAY)
            return WriteCounts()
        self._metrics.commit_seconds.observe(time.perf_counter() - started)
        self._count(plan, counts)
        for mower_id, memory in plan.adopt.items():
            ref = self._supervisor.get(self._key(mower_id))
            if ref is not None:
                ref.tell(Adopt(memory))
        acks: list[Msg] = []
        for mower_id, entry in mowers.items():
            dropped = drops.get(mower_id)
            if dropped is None:
                acks.extend(entry.msgs)
                continue
            for i, msg in enumerate(entry.msgs):
                if i in dropped:
                    self._drop(dropped[i], entry.states[i])
                    await msg.term()
                else:
                    acks.append(msg)
        await ack_all(acks)
        return counts

    async def _transact(
        self,
        states: dict[uuid.UUID, list[MowerState]],
        outcomes: dict[uuid.UUID, FingerprintAnswer],
    ) -> tuple[Plan, dict[uuid.UUID, dict[int, str]], WriteCounts]:
        # One transaction: lock the mowers' latest rows, plan against them, write.
        attempt = 1
        while True:
            try:
                async with self._store.state_writer() as tx:
                    stored, directory = await tx.lock(list(states))
                    plan, drops = plan_batch(states, outcomes, stored, directory, self._rules)
                    counts = await tx.write(plan.batch)
                return plan, drops, counts
            except StoreConflictError as err:
                # Rolled back for another replica's sake: the same batch, planned again
                # against what is stored now, goes through.
                if attempt == _CONFLICT_ATTEMPTS:
                    raise
                log.info("batch lost a race; trying again", attempt=attempt, error=str(err))
                attempt += 1

    async def _refuse(self, mowers: dict[uuid.UUID, MowerStates], err: StoreRejectedError) -> None:
        # The actor decided against a memory that was never committed: restart it from the
        # stored row, as after any failed commit.
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
            await self._supervisor.stop(self._key(mower_id))
            self._refused.inc(len(entry.msgs))
            for msg in entry.msgs:
                await msg.term()

    async def _reject(self, msg: Msg, reason: str, detail: str | None) -> None:
        self._rejected[reason].inc()
        if reason == "subject-mismatch":
            log.warning("state terminated", reason=reason, subject=msg.subject, mower_id=detail)
        else:
            log.warning("state terminated", reason=reason, subject=msg.subject, error=detail)
        await msg.term()

    async def _decide(
        self, mowers: dict[uuid.UUID, MowerStates]
    ) -> dict[uuid.UUID, FingerprintAnswer | None]:
        # ``Decide`` itself asks: a Struct's constructor runs no Python frame per mower.
        return await self._ask.ask({m: e.states for m, e in mowers.items()}, Decide)

    def _count(self, plan: Plan, counts: WriteCounts) -> None:
        latest, history, positions = self._rows
        latest.inc(counts.latest)
        history.inc(counts.history)
        positions.inc(counts.positions)
        skipped = sum(1 for d in plan.decisions if d.drop is None and d.heartbeat_skipped)
        self._metrics.heartbeats_skipped.inc(skipped)

    def _drop(self, reason: str, state: MowerState) -> None:
        self._metrics.dropped.labels(reason=reason).inc()
        log.warning(
            "state dropped",
            reason=reason,
            mower_id=str(state.mower_id),
            account_id=str(state.account_id),
        )


def _counted(told: Callable[[int], object]) -> Callable[[list[uuid.UUID]], object]:
    def started(mowers: list[uuid.UUID]) -> object:
        return told(len(mowers))

    return started


def _added(a: WriteCounts, b: WriteCounts) -> WriteCounts:
    return WriteCounts(a.latest + b.latest, a.history + b.history, a.positions + b.positions)
