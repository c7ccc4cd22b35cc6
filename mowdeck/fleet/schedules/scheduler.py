"""The scheduler every Fleet replica runs: claim due slots, decide, commit, publish.

A round claims due schedules in batches (``ScheduleStore.claim_due``: a schedule is held
by one replica's transaction at a time), decides each (``plan.decide_due``) and commits
the slots with their commands (command log, audit trail, outbox) in that transaction;
only then are the commands published. A replica that stops after the commit leaves its
commands in the outbox: after ``republish_seconds`` any replica publishes them under the
same command ids, which JetStream (``Nats-Msg-Id``) and the devices answer once. So a
slot starts at most once, and at least once while a replica runs.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

import structlog
from prometheus_client import CollectorRegistry, Counter, Histogram

from contracts.v1 import CommandEnvelope, ReturnToDock, StartMow, decode_command, encode
from mowdeck.fleet.ports import CommandRecord
from mowdeck.fleet.schedules.plan import Order, ScheduleState, decide_due
from mowdeck.fleet.schedules.ports import Issued, ScheduleStore
from mowdeck.kit.background import cancel_and_wait
from mowdeck.kit.bus import BusError, ExpiredCommandError

__all__ = ["SCHEDULER", "Scheduler", "SchedulerSettings", "issue", "publish_all"]

log = structlog.get_logger("mowdeck.fleet.scheduler")
SCHEDULER = "scheduler"  # the issuer of the scheduler's commands in the audit trail


class Publishes(Protocol):
    """Publishes a command envelope (``CommandPublisher``)."""

    async def publish(self, envelope: CommandEnvelope, body: bytes) -> None:
        """Return once the bus stored it."""
        ...


@dataclass(frozen=True, slots=True)
class SchedulerSettings:
    """How often a replica looks for due slots, how many it takes at once, the commands'
    lifetime, and how long a committed command may stay unpublished."""

    interval_seconds: float = 1.0
    batch: int = 500
    ttl_seconds: float = 30.0
    republish_seconds: float = 10.0


def issue(
    state: ScheduleState, order: Order, *, issued_by: str, now: datetime, ttl: timedelta
) -> tuple[CommandEnvelope, Issued]:
    """The envelope of an order with a new command id, and its record for the store."""
    command = (
        StartMow(duration_min=order.duration_min, work_area=order.work_area)
        if order.kind == "start_mow"
        else ReturnToDock()
    )
    envelope = CommandEnvelope.issue(
        mower_id=state.mower_id,
        account_id=state.account_id,
        command=command,
        issued_by=issued_by,
        now=now,
        ttl=ttl,
    )
    return envelope, Issued(CommandRecord.of(envelope), encode(envelope))


async def publish_all(
    publisher: Publishes, store: ScheduleStore, sent: Sequence[tuple[CommandEnvelope, bytes]]
) -> int:
    """Publish committed commands and forget those the bus stored (or that expired);
    the rest stay owed. How many were published."""
    if not sent:
        return 0
    outcomes = await asyncio.gather(
        *(publisher.publish(envelope, body) for envelope, body in sent), return_exceptions=True
    )
    done: list[uuid.UUID] = []
    published = 0
    for (envelope, _), outcome in zip(sent, outcomes, strict=True):
        if outcome is None:
            done.append(envelope.command_id)
            published += 1
        elif isinstance(outcome, ExpiredCommandError):
            log.warning(
                "scheduled command expired unpublished", command_id=str(envelope.command_id)
            )
            done.append(envelope.command_id)
        elif isinstance(outcome, BusError):
            log.warning("scheduled command not published yet", command_id=str(envelope.command_id))
        else:
            raise outcome
    await store.published(done)
    return published


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
            "From a slot's start to its start_mow committed",
            buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 60, 600),
            registry=registry,
        )
        self._task: asyncio.Task[None] | None = None

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
        """Every slot event due now, then the commands owed too long; how many were issued."""
        issued = 0
        publishing: list[asyncio.Future[int]] = []
        while True:
            now = self._clock()
            sent: list[tuple[CommandEnvelope, bytes]] = []
            async with self._store.claim_due(now, self._settings.batch) as claim:
                for state in claim.states:
                    decision = decide_due(state, now)
                    made = None
                    if decision.order is not None:
                        envelope, made = issue(
                            state, decision.order, issued_by=SCHEDULER, now=now, ttl=self._ttl
                        )
                        sent.append((envelope, made.body))
                        self._issued.labels(envelope.kind).inc()
                        if decision.order.kind == "start_mow" and decision.slot is not None:
                            late = (now - decision.slot.start).total_seconds()
                            self._lateness.observe(late)
                    claim.decide(state, decision, made)
            issued += len(sent)
            # Published while the next batch is claimed: the database and the bus overlap.
            publishing.append(
                asyncio.ensure_future(publish_all(self._publisher, self._store, sent))
            )
            if len(claim.states) < self._settings.batch:
                break
        await asyncio.gather(*publishing)
        await self.republish()
        return issued

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
