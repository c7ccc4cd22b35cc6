"""The outbox's latency: the fan-out's write to the push received, at a fixed rate.

Used by ``tests.bench.notifications_push``; it makes a database of its own.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import asyncpg
from aiohttp import web

from mowdeck.kit.migrate import discover, migrate, sql_root
from mowdeck.notifications.channels.webpush import push_topic
from mowdeck.notifications.events import RuleEvent
from mowdeck.notifications.model import InboxEntry
from mowdeck.notifications.postgres import PostgresNotificationStore
from mowdeck.notifications.targets import TargetPolicy, validate_target
from tests.integration.notifications.outbox_support import delivery_settings, worker_for
from tests.support.postgres import create_database, drop_database
from tests.support.webpush_receiver import WebPushReceiver

USERS = 50
ACCOUNT = uuid.UUID(int=1)


class TimedReceiver(WebPushReceiver):
    """Notes when each push (by its Topic, one per mower) arrives."""

    def __init__(self) -> None:
        super().__init__(sample_every=50)
        self.arrived: dict[str, float] = {}

    async def _push(self, request: web.Request) -> web.StreamResponse:
        self.arrived.setdefault(request.headers.get("Topic", ""), time.perf_counter())
        return await super()._push(request)


@dataclass
class Latency:
    expected: int
    count: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    lag_ms: float


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def _pending(store: PostgresNotificationStore, count: int) -> list[tuple[int, RuleEvent]]:
    now = datetime.now(UTC)
    events = [
        RuleEvent(
            kind="battery_low",
            mower_id=uuid.uuid4(),
            account_id=ACCOUNT,
            severity="warning",
            dedupe_key=f"battery_low:{i}",
            message_key="battery_low",
            params={"battery": 18, "mower": f"Mower {i}"},
            occurred_at=now,
        )
        for i in range(count)
    ]
    async with store.watches() as tx:  # as the rules' transaction writes them
        await tx.lock([events[0].mower_id])
        await tx.write([], events)
    claimed = await store.claim_pending(now + timedelta(seconds=1), count, timedelta(hours=1))
    return [(p.id, p.event) for p in claimed]


async def run_outbox_latency(rate: float, seconds: float) -> Latency:
    """Fan-out writes at ``rate`` per second for ``seconds``; latencies to the receiver."""
    dsn = await asyncio.to_thread(create_database, "mowdeck_bench")
    try:
        await migrate(dsn, discover(sql_root(), ["notifications"]))
        pool = await asyncpg.create_pool(dsn, min_size=2, max_size=16)
        try:
            return await _measure(PostgresNotificationStore(pool), rate, seconds)
        finally:
            await pool.close()
    finally:
        await asyncio.to_thread(drop_database, dsn)


async def _measure(store: PostgresNotificationStore, rate: float, seconds: float) -> Latency:
    count = int(rate * seconds)
    settings = delivery_settings()
    policy = TargetPolicy.from_settings(settings)
    receiver = TimedReceiver()
    async with receiver:
        for u in range(USERS):
            doc = {"channel": "webpush", "subscription": receiver.subscribe().to_json()}
            target = validate_target(doc, policy)
            assert not isinstance(target, list)
            await store.add_target(f"user-{u}", target)
        pending = await _pending(store, count)
        started: dict[str, float] = {}
        topics: dict[str, str] = {}
        for _, ev in pending:
            topics[ev.dedupe_key] = push_topic(ev.kind, str(ev.mower_id))
        lag = 0.0
        writes: list[asyncio.Task[object]] = []
        async with worker_for(store, settings, start=True):
            await asyncio.sleep(0.5)  # listening
            t0 = time.perf_counter()
            for i, (pending_id, ev) in enumerate(pending):
                due = t0 + i / rate
                wait = due - time.perf_counter()
                if wait > 0:
                    await asyncio.sleep(wait)
                lag = max(lag, -wait)
                started[topics[ev.dedupe_key]] = time.perf_counter()
                entry = [InboxEntry(user_id=f"user-{i % USERS}")]
                # Open loop: a slow write does not hold back the next one's start.
                writes.append(
                    asyncio.create_task(store.complete_pending(pending_id, ev, entry, 200))
                )
            await asyncio.gather(*writes)
            deadline = time.perf_counter() + 10
            while len(receiver.arrived) < count and time.perf_counter() < deadline:
                await asyncio.sleep(0.05)
    latencies = [
        (receiver.arrived[t] - s) * 1000 for t, s in started.items() if t in receiver.arrived
    ]
    return Latency(
        expected=count,
        count=len(latencies),
        p50_ms=_quantile(latencies, 0.5),
        p99_ms=_quantile(latencies, 0.99),
        max_ms=max(latencies, default=float("nan")),
        lag_ms=lag * 1000,
    )
