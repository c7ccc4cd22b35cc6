"""Delivery across processes and replicas: a worker killed after its claim, and two
workers sharing 1,000 deliveries."""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import asyncpg
import pytest

from mowdeck.notifications.inbox.model import InboxEntry
from mowdeck.notifications.infra import Stores
from tests.integration.notifications.delivery.worker_support import (
    delivery_settings,
    register,
    rows,
    worker_for,
)
from tests.support.webpush_receiver import Answer, WebPushReceiver
from tests.unit.notifications.stores import event, fan_out, queue

CHILD_LEASE = 3.0


async def _readline(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), timeout)
    return line.strip()


def _spawn(dsn: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration.notifications.delivery.worker_child",
            dsn,
            str(CHILD_LEASE),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


@pytest.mark.slow
async def test_a_worker_killed_after_its_claim_is_replaced_after_the_lease(
    stores: Stores,
    pool: asyncpg.Pool,
    migrated: str,
    receiver: WebPushReceiver,
) -> None:
    sub = receiver.subscribe()
    # The child's send reaches the push service and hangs there until it is killed.
    receiver.answer(sub, Answer(stall=60))
    await register(stores, "ann", sub)
    proc = _spawn(migrated)
    try:
        assert await _readline(proc, 20) == "ready"
        await fan_out(stores, "k1", [InboxEntry(user_id="ann")])
        await receiver.wait_for(1, timeout=10)
        [claimed] = await rows(pool)
        assert claimed["attempts"] == 1
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        killed_at = time.time()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        assert proc.stdout is not None
        proc.stdout.close()
    lease_ends = claimed["next_attempt_at"]
    settings = delivery_settings(
        notifications_lease_seconds=0.5, notifications_delivery_poll_seconds=0.1
    )
    async with worker_for(stores.deliveries, settings, start=True):
        await receiver.wait_for(2, timeout=CHILD_LEASE + 10)
        second_at = time.time()
        await asyncio.sleep(2.0)  # four of the second worker's leases: nothing more
    assert receiver.count == 2
    assert second_at >= lease_ends.timestamp() - 0.05, "sent again before the lease ended"
    assert second_at >= killed_at
    [row] = await rows(pool)
    assert (row["state"], row["attempts"]) == ("sent", 2)


@pytest.mark.slow
async def test_two_replicas_send_each_of_1000_deliveries_once(
    stores: Stores, migrated: str, receiver: WebPushReceiver
) -> None:
    subs = [receiver.subscribe() for _ in range(10)]
    for i, sub in enumerate(subs):
        await register(stores, f"user-{i}", sub)
    entries = [InboxEntry(user_id=f"user-{i}") for i in range(10)]
    settings = delivery_settings(notifications_delivery_poll_seconds=0.2)
    pools = [await asyncpg.create_pool(migrated, min_size=1, max_size=4) for _ in range(2)]
    replicas = [Stores.postgres(p).deliveries for p in pools]
    try:
        async with (
            worker_for(replicas[0], settings, start=True) as one,
            worker_for(replicas[1], settings, start=True) as two,
        ):
            await asyncio.sleep(0.3)
            for n in range(100):  # 100 events for 10 users with one browser each
                await queue(stores, event(f"k{n}", params={"battery": 18, "mower": "R"}))
                [pending] = await stores.pending.claim_pending(
                    event("x").occurred_at + timedelta(hours=3), 10, timedelta(seconds=60)
                )
                await stores.pending.complete_pending(pending.id, pending.event, entries, 200)
            await receiver.wait_for(1000, timeout=60)
            await asyncio.sleep(1.0)
        sent = (one.count("sent"), two.count("sent"))
    finally:
        for p in pools:
            await p.close()
    assert receiver.count == 1000, "the receiver counts every request, repeats included"
    per_device = collections.Counter(
        (r.subscription_id, r.payload["title"] if r.payload else None) for r in receiver.received
    )
    assert len(per_device) == 10 and set(per_device.values()) == {100}
    assert sum(sent) == 1000
    assert min(sent) > 0, f"one replica sent everything: {sent}"
