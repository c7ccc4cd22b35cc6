"""State ingest: Telemetry's steps of the kit's actor batch (``kit/actor_batch.py``).

Per batch: payloads PostgreSQL cannot store (a NUL character) and states from beyond the
clock's skew are rejected with the kit's own (malformed, another mower's subject); each
mower's actor decides what to store (``Decide``: its fingerprint rules); then one
transaction locks the batch's latest rows FOR UPDATE and reads their directory entries,
drops states whose account differs, re-decides a mower from the stored row when another
replica moved it, a state was dropped or the batch before corrected the memory, and writes
one statement per table. What happens when the transaction fails, loses a race or is
refused (split by mowers) is the kit's.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import cast

import structlog
from nats.aio.msg import Msg

from actors import AnswerSink, LoopBridge, ShardSupervisor
from contracts.v1 import MowerState
from mowdeck.kit.actor_batch import ActorBatch, Committed
from mowdeck.kit.state_batches import MowerStates, SortedStates, StateCheck
from mowdeck.kit.storable import may_hold_nul, nul_field
from mowdeck.telemetry.actor import Adopt, Decide, FingerprintAnswer, LatestRowSnapshots
from mowdeck.telemetry.errors import StoreConflictError, StoreRejectedError
from mowdeck.telemetry.fingerprint import Rules
from mowdeck.telemetry.metrics import TelemetryMetrics
from mowdeck.telemetry.model import Memory
from mowdeck.telemetry.plan import Plan, plan_batch
from mowdeck.telemetry.ports import TelemetryStore, WriteCounts

__all__ = ["StateBatcher"]

log = structlog.get_logger("mowdeck.telemetry.ingest")


class StateBatcher(ActorBatch[FingerprintAnswer, datetime, tuple[Plan, WriteCounts]]):
    """Telemetry's actor batch: fingerprint decisions, one transaction per batch.

    While batch N is in its transaction (PostgreSQL's time, not ours), batch N+1 is
    decoded and decided. The actors of N+1 may have decided against a memory that N then
    corrected or failed to commit; the transaction of N+1 re-reads the locked rows and
    re-decides every mower whose stored row is not the memory its actor decided against,
    so the ingest never writes a wrong row.
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
        super().__init__(
            name="telemetry-batcher",
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
        self._store = store
        self._rules = rules
        self._metrics = metrics
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

    async def process(self, msgs: Sequence[Msg]) -> WriteCounts:  # type: ignore[override]
        """Run one batch through decode, decide, commit and settle: the rows written."""
        total = WriteCounts()
        for _plan, counts in await super().process(msgs):
            total = WriteCounts(
                total.latest + counts.latest,
                total.history + counts.history,
                total.positions + counts.positions,
            )
        return total

    # -- the steps ------------------------------------------------------------------------

    def context(self) -> datetime:
        """The horizon: a state observed after it is from the future."""
        return datetime.now(UTC) + self._rules.max_clock_skew

    def check(self, context: datetime) -> StateCheck:
        """A NUL character PostgreSQL cannot store; a state from the future."""
        horizon = context

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

    def sorted(self, batch: SortedStates) -> None:
        """Count the batch, its states and what it rejected."""
        metrics, foreign = self._metrics, len(batch.foreign)
        total = sum(len(e.msgs) for e in batch.mowers.values()) + len(batch.rejected) + foreign
        metrics.batch_size.observe(total)
        metrics.states_received.inc(total - foreign)
        for rejected in batch.rejected:
            self._rejected[rejected.reason].inc()
        if foreign:
            # The consumer reads the whole stream (see service.py); these are not states.
            metrics.foreign_subjects.inc(foreign)

    def question(
        self, entry: MowerStates, sink: AnswerSink[uuid.UUID, FingerprintAnswer], context: datetime
    ) -> Decide:
        """``Decide`` the mower's states."""
        del context
        return Decide(entry.states, sink)

    async def write(
        self,
        mowers: Mapping[uuid.UUID, MowerStates],
        answers: Mapping[uuid.UUID, FingerprintAnswer],
        context: datetime,
    ) -> Committed[tuple[Plan, WriteCounts]]:
        """Lock the mowers' latest rows, plan against them, write."""
        del context
        states = {m: e.states for m, e in mowers.items()}
        async with self._store.state_writer() as tx:
            stored, directory = await tx.lock(list(states))
            plan, drops = plan_batch(states, dict(answers), stored, directory, self._rules)
            counts = await tx.write(plan.batch)
        return Committed((plan, counts), adopt=plan.adopt, drops=drops)

    def adopt(self, memory: object) -> Adopt:
        """Adopt the memory the transaction decided on (None: nothing stored)."""
        return Adopt(cast("Memory | None", memory))

    def committed(
        self, committed: Committed[tuple[Plan, WriteCounts]], states: int, seconds: float
    ) -> None:
        """Count the rows written and the heartbeats skipped."""
        del states
        plan, counts = committed.result
        self._metrics.commit_seconds.observe(seconds)
        latest, history, positions = self._rows
        latest.inc(counts.latest)
        history.inc(counts.history)
        positions.inc(counts.positions)
        skipped = sum(1 for d in plan.decisions if d.drop is None and d.heartbeat_skipped)
        self._metrics.heartbeats_skipped.inc(skipped)

    def dropped(self, reason: str, state: MowerState) -> None:
        """Count a state dropped by the transaction or refused by the store."""
        del state
        self._metrics.dropped.labels(reason=reason).inc()
