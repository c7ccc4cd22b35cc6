"""The scheduler every Fleet replica runs: claim due slots, decide, commit, publish.

A round claims due schedules in batches (``ScheduleStore.claim_due``: a schedule is held
by one replica's transaction at a time), decides each (``plan.decide_due``) and commits
the slots with their commands (command log, audit trail, outbox) in that transaction;
only then are the commands published. A slot's start is claimed up to ``lead_seconds``
ahead and published at its start, so that only the publish lies on the start's path; a
dock of the mower before then withdraws it from the outbox. A replica that stops after
the commit leaves its commands in the outbox: after ``republish_seconds`` any replica
publishes them under the same command ids, which JetStream (``Nats-Msg-Id``) and the
devices answer once. So a slot starts at most once, and at least once while a replica
runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import structlog
from prometheus_client import CollectorRegistry, Counter, Histogram

from contracts.v1 import CommandEnvelope, decode_command
from mowdeck.fleet.schedules.outbox import Publishes, issue, publish_all
from mowdeck.fleet.schedules.plan import decide_due
from mowdeck.fleet.schedules.ports import ScheduleStore
from mowdeck.kit.background import cancel_and_wait

__all__ = ["SCHEDULER", "Publishes", "Scheduler", "SchedulerSettings", "issue", "publish_all"]

log = structlog.get_logger("mowdeck.fleet.scheduler")
SCHEDULER = "scheduler"  # the issuer of the scheduler's commands in the audit trail


@dataclass
class Group:
    """Commands of one claim to publish at one time, and the slot starts among them."""

    sent: list[tuple[CommandEnvelope, bytes]] = field(default_factory=list)
    starts: list[datetime] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SchedulerSettings:
    """How often a replica looks for due slots, how many it takes at once, the commands'
    lifetime, and how long a committed command may stay unpublished."""

    interval_seconds: float = 1.0
    batch: int = 500
    ttl_seconds: float = 30.0
    republish_seconds: float = 10.0
    # A slot's start is claimed and committed up to this long ahead, and published at it.
    lead_seconds: float = 0.0


class Scheduler:
    """Runs scheduler rounds on a timer; ``run_once`` is the unit tests and benches drive."""

    def __init__(
        self,
        store: ScheduleStore,
        publisher: Publishes,
        settings: SchedulerSettings,
        registry: CollectorRegistry,
        *,
        clock: Callable[[], datetime],
    ) -> None:
        self._store = store
        self._publisher = publisher
        self._settings = settings
        self._clock = clock
        self._ttl = timedelta(seconds=settings.ttl_seconds)
        self._issued = Counter(
            "mowdeck_fleet_scheduler_commands_total",
            "Commands the scheduler committed",
            ["kind"],
            registry=registry,
        )
        self._lateness = Histogram(
            "mowdeck_fleet_scheduler_start_lateness_seconds",
            "From a slot's start to its start_mow stored by the bus",
            buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 60, 600),
            registry=registry,
        )
        self._task: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Task[None]] = set()

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The scheduler's task while it runs."""
        return self._task

    async def pause(self) -> float:
        """Seconds until the next round: the interval, or less when a slot is due sooner
        (a slot at 08:00 is claimed at 08:00, not up to an interval later)."""
        wait = self._settings.interval_seconds
        due = await self._store.next_due()
        if due is not None:
            # At least a moment: due rows another replica holds are not spun on.
            wait = min(wait, max((due - self._clock()).total_seconds(), 0.02))
        return wait

    async def _loop(self) -> None:
        while True:
            wait = self._settings.interval_seconds
            try:
                await self.run_once()
                wait = await self.pause()
            except Exception:
                log.exception("scheduler round failed; the next one runs after the interval")
            await asyncio.sleep(wait)

    async def run_once(self) -> int:
        """Every slot event due now (a slot's start: due within the lead, published at
        it), then the commands owed too long; how many commands were committed."""
        issued = 0
        publishing: list[asyncio.Future[None]] = []
        lead = timedelta(seconds=self._settings.lead_seconds)
        while True:
            now = self._clock()
            groups: dict[datetime, Group] = {}
            async with self._store.claim_due(now, self._settings.batch, now + lead) as claim:
                for state in claim.states:
                    at = max(now, state.due.at) if state.due is not None else now
                    decision = decide_due(state, at)
                    made = None
                    if decision.order is not None:
                        envelope, made = issue(
                            state, decision.order, issued_by=SCHEDULER, now=at, ttl=self._ttl
                        )
                        group = groups.setdefault(at, Group())
                        group.sent.append((envelope, made.body))
                        if decision.order.kind == "start_mow" and decision.slot is not None:
                            group.starts.append(decision.slot.start)
                        self._issued.labels(envelope.kind).inc()
                    claim.decide(state, decision, made)
            for at, group in groups.items():
                issued += len(group.sent)
                if at <= now:  # published while the next batch is claimed
                    publishing.append(asyncio.ensure_future(self._publish(group)))
                else:
                    self._later(at, group)
            if len(claim.states) < self._settings.batch:
                break
        await asyncio.gather(*publishing)
        await self.republish()
        return issued

    async def _publish(self, group: Group) -> None:
        await publish_all(self._publisher, self._store, group.sent)
        now = self._clock()
        for start in group.starts:
            self._lateness.observe((now - start).total_seconds())

    def _later(self, at: datetime, group: Group) -> None:
        async def publish_at() -> None:
            await asyncio.sleep(max((at - self._clock()).total_seconds(), 0.0))
            await self._publish(group)

        task = asyncio.get_running_loop().create_task(publish_at(), name="fleet-scheduler-at")
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def drain(self) -> None:
        """Wait for the starts claimed ahead to be published."""
        while self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)

    async def republish(self) -> int:
        """Publish commands committed but owed longer than the lease (a replica stopped)."""
        now = self._clock()
        older = now - timedelta(seconds=self._settings.republish_seconds)
        owed = await self._store.unpublished(older, now, self._settings.batch)
        sent = []
        for command_id, body in owed:
            try:
                sent.append((decode_command(body), body))
            except Exception:
                log.exception("owed command unreadable; dropped", command_id=str(command_id))
                await self._store.published([command_id])
        if sent:
            log.info("publishing commands another replica committed", count=len(sent))
        return await publish_all(self._publisher, self._store, sent)

    def start(self) -> None:
        """Run rounds: at once, then when the next slot is due or after the interval."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._loop(), name="fleet-scheduler"
            )

    async def stop(self) -> None:
        """Stop (a round's transaction not committed decided nothing)."""
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        # Starts claimed ahead stay in the outbox: another replica publishes them.
        for task in list(self._pending):
            await cancel_and_wait(task)
