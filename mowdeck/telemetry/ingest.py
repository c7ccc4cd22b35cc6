"""State ingest: micro-batches of states, decided by per-mower actors, one commit, then acks.

Per batch: decode (malformed payloads and subjects naming another mower are terminated),
ask each mower's actor for its decisions, then in one transaction lock the batch's latest
rows FOR UPDATE and read their directory entries, drop states whose account differs,
re-decide a mower from the stored row when another replica moved it (or a state was
dropped), write one statement per table, commit, and only then ack.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import structlog
from nats.aio.msg import Msg

from actors import LoopBridge, ShardSupervisor
from contracts.v1 import ContractError, MowerState, decode_state
from contracts.v1.subjects import mower_id_from_subject
from mowdeck.telemetry.actor import Adopt, Decide, DecisionSink, LatestRowSnapshots, Outcome
from mowdeck.telemetry.fingerprint import Decision, Rules, decide_all
from mowdeck.telemetry.metrics import TelemetryMetrics
from mowdeck.telemetry.model import Memory
from mowdeck.telemetry.ports import TelemetryStore, WriteBatch, WriteCounts

__all__ = ["StateBatcher", "plan_batch"]

log = structlog.get_logger("mowdeck.telemetry.ingest")
_DECIDE_TIMEOUT = 10.0
_NAK_DELAY = 1.0


@dataclass(slots=True)
class _Mower:
    msgs: list[Msg] = field(default_factory=list)
    states: list[MowerState] = field(default_factory=list)


@dataclass(slots=True)
class Plan:
    """What a batch writes, which messages are terminated, and memories to correct."""

    batch: WriteBatch = field(default_factory=WriteBatch)
    drops: dict[int, str] = field(default_factory=dict)  # index within the mower -> reason
    adopt: dict[uuid.UUID, Memory | None] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)


def plan_batch(
    states: Mapping[uuid.UUID, Sequence[MowerState]],
    outcomes: dict[uuid.UUID, Outcome],
    stored: dict[uuid.UUID, Memory],
    directory: dict[uuid.UUID, uuid.UUID],
    rules: Rules,
) -> tuple[Plan, dict[uuid.UUID, dict[int, str]]]:
    """Turn actor outcomes into a write batch, re-deciding mowers whose stored row moved."""
    plan = Plan()
    drops: dict[uuid.UUID, dict[int, str]] = {}
    for mower_id, outcome in outcomes.items():
        mower_states = states[mower_id]
        account = directory.get(mower_id)
        dropped = {
            i: "account-mismatch-directory"
            for i, s in enumerate(mower_states)
            if account is not None and s.account_id != account
        }
        decisions, memory = outcome.decisions, outcome.memory
        base = stored.get(mower_id)
        if dropped or base != outcome.base:
            kept = [s for i, s in enumerate(mower_states) if i not in dropped]
            decisions, memory = decide_all(base, kept, rules)
            plan.adopt[mower_id] = memory
            # Re-align the decisions with the mower's message indexes.
            it = iter(decisions)
            decisions = [
                Decision(s, drop=dropped[i]) if i in dropped else next(it)
                for i, s in enumerate(mower_states)
            ]
        newest: tuple[MowerState, Memory] | None = None
        for i, decision in enumerate(decisions):
            if decision.drop is not None:
                if decision.drop != "duplicate":
                    dropped[i] = decision.drop
                continue
            if decision.latest and memory is not None:
                newest = (decision.state, memory)
            if decision.history:
                plan.batch.history.append(decision.state)
            if decision.position:
                plan.batch.positions.append(decision.state)
        if newest is not None:
            plan.batch.latest.append(newest)
        plan.decisions.extend(decisions)
        if dropped:
            drops[mower_id] = dropped
    return plan, drops


class StateBatcher:
    """Collects state messages and runs them through the pipeline one batch at a time."""

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
    ) -> None:
        self._store = store
        self._supervisor = supervisor
        self._snapshots = snapshots
        self._bridge = bridge
        self._rules = rules
        self._metrics = metrics
        self._batch_max = batch_max
        self._linger = linger
        self._pending: list[Msg] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    async def on_message(self, msg: Msg) -> None:
        """The consumer callback: queue the message; it is settled after its batch."""
        self._pending.append(msg)
        self._wake.set()

    def start(self) -> None:
        """Start the batching task."""
        self._stopping = False
        self._task = asyncio.get_running_loop().create_task(self._run(), name="telemetry-batcher")

    async def stop(self) -> None:
        """Finish the queued messages, then stop."""
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            if not self._pending:
                if self._stopping:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            if len(self._pending) < self._batch_max and self._linger and not self._stopping:
                await asyncio.sleep(self._linger)
            batch = self._pending[: self._batch_max]
            del self._pending[: self._batch_max]
            try:
                await self.process(batch)
            except Exception:
                log.exception("batch failed", size=len(batch))
                await _settle_all(batch, ack=False)

    async def process(self, msgs: Sequence[Msg]) -> WriteCounts:
        """Run one batch through decode, decide, commit and settle."""
        self._metrics.states_received.inc(len(msgs))
        self._metrics.batch_size.observe(len(msgs))
        mowers: dict[uuid.UUID, _Mower] = {}
        for msg in msgs:
            state = await self._decode(msg)
            if state is not None:
                entry = mowers.setdefault(state.mower_id, _Mower())
                entry.msgs.append(msg)
                entry.states.append(state)
        if not mowers:
            return WriteCounts()
        outcomes = await self._decide(mowers)
        failed = [m for m in mowers if outcomes.get(m) is None]
        for mower_id in failed:
            await _settle_all(mowers.pop(mower_id).msgs, ack=False)
        decided = {m: o for m, o in outcomes.items() if o is not None}
        states = {m: e.states for m, e in mowers.items()}
        started = time.perf_counter()
        try:
            async with self._store.state_writer() as tx:
                stored, directory = await tx.lock(list(mowers))
                plan, drops = plan_batch(states, decided, stored, directory, self._rules)
                counts = await tx.write(plan.batch)
        except Exception:
            log.exception("batch commit failed", mowers=len(mowers))
            # The actors decided against memories that were never committed: restart them
            # from the stored rows, and let JetStream redeliver the whole batch.
            await asyncio.gather(*(self._supervisor.stop(str(m)) for m in mowers))
            await _settle_all([msg for e in mowers.values() for msg in e.msgs], ack=False)
            return WriteCounts()
        self._metrics.commit_seconds.observe(time.perf_counter() - started)
        self._count(plan, counts)
        for mower_id, memory in plan.adopt.items():
            ref = self._supervisor.get(str(mower_id))
            if ref is not None:
                ref.tell(Adopt(memory))
        for mower_id, entry in mowers.items():
            dropped = drops.get(mower_id, {})
            for i, msg in enumerate(entry.msgs):
                if i in dropped:
                    self._drop(dropped[i], entry.states[i])
                    await msg.term()
                else:
                    await msg.ack()
        return counts

    async def _decode(self, msg: Msg) -> MowerState | None:
        try:
            state = decode_state(msg.data)
            subject_mower = mower_id_from_subject(msg.subject)
        except ContractError as err:
            self._metrics.dropped.labels(reason="malformed").inc()
            log.warning("state terminated", reason="malformed", subject=msg.subject, error=str(err))
            await msg.term()
            return None
        if subject_mower != state.mower_id:
            self._metrics.dropped.labels(reason="subject-mismatch").inc()
            log.warning(
                "state terminated",
                reason="subject-mismatch",
                subject=msg.subject,
                mower_id=str(state.mower_id),
            )
            await msg.term()
            return None
        return state

    async def _decide(self, mowers: dict[uuid.UUID, _Mower]) -> dict[uuid.UUID, Outcome | None]:
        missing = [m for m in mowers if self._supervisor.get(str(m)) is None]
        if missing:
            await self._snapshots.prefetch(missing)
        sink = DecisionSink(self._bridge, len(mowers))
        for mower_id, entry in mowers.items():
            try:
                ref = await self._supervisor.get_or_start(str(mower_id))
                ref.tell(Decide(entry.states, sink))
            except Exception:
                log.exception("fingerprint actor unavailable", mower_id=str(mower_id))
                sink.deliver(mower_id, None)
        try:
            await asyncio.wait_for(asyncio.shield(sink.done), _DECIDE_TIMEOUT)
        except TimeoutError:
            log.error("fingerprint actors did not answer", mowers=len(mowers))
        return {m: sink.outcomes.get(m) for m in mowers}

    def _count(self, plan: Plan, counts: WriteCounts) -> None:
        rows = self._metrics.rows_written
        rows.labels(table="mower_latest").inc(counts.latest)
        rows.labels(table="mower_history").inc(counts.history)
        rows.labels(table="mower_positions").inc(counts.positions)
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


async def _settle_all(msgs: Sequence[Msg], *, ack: bool) -> None:
    for msg in msgs:
        try:
            await (msg.ack() if ack else msg.nak(delay=_NAK_DELAY))
        except Exception as err:
            log.debug("settle failed", error=str(err))
