"""The delivery worker against PostgreSQL and local push and ntfy receivers: every result
path, the backoff schedule, LISTEN/NOTIFY wakeups, the quiet-hours summary, pruning."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import asyncpg
import pytest
import structlog

from mowdeck.kit.logging import ids_as_text
from mowdeck.notifications.delivery.targets import NtfyTarget, TargetPolicy
from mowdeck.notifications.inbox.model import InboxEntry
from mowdeck.notifications.inbox.preferences import Preferences
from mowdeck.notifications.infra import Stores
from mowdeck.notifications.rules.quiet import QuietHours
from tests.integration.notifications.delivery.worker_support import (
    delivery_settings,
    register,
    rows,
    worker_for,
)
from tests.support.ntfy_receiver import NtfyReceiver
from tests.support.webpush_receiver import Answer, WebPushReceiver
from tests.unit.notifications.samples import ACCOUNT, MOWER, Clock, at
from tests.unit.notifications.stores import fan_out

SETTINGS = delivery_settings()
POLICY = TargetPolicy.from_settings(SETTINGS)


@pytest.mark.parametrize(
    ("answer", "state", "error", "target_kept"),
    [
        (Answer(201), "sent", None, True),
        (Answer(404), None, None, False),
        (Answer(410), None, None, False),
        (Answer(400), "failed", "push service refused the request", True),
        (Answer(403), "failed", "VAPID authorization refused", True),
        (Answer(413), "failed", "payload too large", True),
        (Answer(503), "due", "server error", True),
        (Answer(429), "due", "rate limited", True),
        (Answer(stall=5), "due", "no answer within 2 s", True),
        (Answer(302, redirect_to="http://127.0.0.1:9/elsewhere"), "failed", "redirect", True),
    ],
    ids=["201", "404", "410", "400", "403", "413", "503", "429", "timeout", "redirect"],
)
async def test_every_result_path(
    *,
    stores: Stores,
    pool: asyncpg.Pool,
    receiver: WebPushReceiver,
    answer: Answer,
    state: str | None,
    error: str | None,
    target_kept: bool,
) -> None:
    sub = receiver.subscribe()
    receiver.answer(sub, answer)
    await register(stores, "ann", sub)
    await fan_out(stores, "k1", [InboxEntry(user_id="ann")])
    clock = Clock(at(20_000))
    async with worker_for(stores.deliveries, SETTINGS, clock) as running:
        assert await running.worker.run_once() == 1
    assert len(receiver.received_by(sub)) == 1
    assert receiver.other_requests == []  # the redirect was not followed
    found = await rows(pool)
    targets = await stores.targets.list_targets("ann")
    assert bool(targets) is target_kept
    if state is None:  # gone: the subscription and its delivery are dropped
        assert found == []
        assert running.count("gone") == 1
        return
    [row] = found
    assert row["state"] == state
    if error is None:
        assert row["last_error"] is None
    else:
        assert error in row["last_error"]
    if state == "due":
        assert row["next_attempt_at"] == clock.now + timedelta(seconds=30)


async def test_a_longer_retry_after_wins_a_shorter_one_does_not(
    stores: Stores, pool: asyncpg.Pool, receiver: WebPushReceiver
) -> None:
    sub = receiver.subscribe()
    receiver.answer(sub, Answer(429, {"Retry-After": "600"}), Answer(503, {"Retry-After": "5"}))
    await register(stores, "ann", sub)
    await fan_out(stores, "k1", [InboxEntry(user_id="ann")])
    clock = Clock(at(20_000))
    async with worker_for(stores.deliveries, SETTINGS, clock) as running:
        await running.worker.run_once()
        [row] = await rows(pool)
        assert row["next_attempt_at"] - clock.now == timedelta(seconds=600)
        clock.now = row["next_attempt_at"]
        await running.worker.run_once()
        [row] = await rows(pool)
        # The second attempt's backoff is 60 s, longer than the 5 s the server asked for.
        assert row["next_attempt_at"] - clock.now == timedelta(seconds=60)


async def test_backoff_doubles_then_fails_after_8_attempts(
    stores: Stores, pool: asyncpg.Pool, receiver: WebPushReceiver
) -> None:
    sub = receiver.subscribe()
    receiver.answer(sub, *[Answer(503)] * 8)
    await register(stores, "ann", sub)
    await fan_out(stores, "k1", [InboxEntry(user_id="ann")])
    clock = Clock(at(20_000))
    waits = []
    async with worker_for(stores.deliveries, SETTINGS, clock) as running:
        for attempt in range(1, 9):
            if attempt > 1:  # a millisecond early, the retry is not due yet
                clock.advance(-0.001)
                assert await running.worker.run_once() == 0, "claimed before it was due"
                clock.advance(0.001)
            assert await running.worker.run_once() == 1
            [row] = await rows(pool)
            if row["state"] != "due":
                break
            waits.append((row["next_attempt_at"] - clock.now).total_seconds())
            clock.now = row["next_attempt_at"]
    assert waits == [30, 60, 120, 240, 480, 960, 1920]
    assert (row["state"], row["attempts"]) == ("failed", 8)
    assert "gave up after 8 attempts" in row["last_error"]
    assert len(receiver.received_by(sub)) == 8


async def test_what_a_delivery_logs_names_the_mower_it_is_about(
    stores: Stores, receiver: WebPushReceiver
) -> None:
    sub = receiver.subscribe()
    receiver.answer(sub, Answer(503))
    await register(stores, "ann", sub)
    await fan_out(stores, "k1", [InboxEntry(user_id="ann")])
    processors = [structlog.contextvars.merge_contextvars, ids_as_text]
    with structlog.testing.capture_logs(processors=processors) as logs:
        async with worker_for(stores.deliveries, SETTINGS, Clock(at(20_000))) as running:
            await running.worker.run_once()
    [entry] = [e for e in logs if e["event"] == "delivery not sent"]
    assert str(entry["mower_id"]) == str(MOWER)


async def test_a_refused_connection_is_retried(
    stores: Stores, pool: asyncpg.Pool, receiver: WebPushReceiver
) -> None:
    sub = receiver.subscribe()
    await register(stores, "ann", sub)
    await receiver.close()  # nothing listens on its port any more
    await fan_out(stores, "k1", [InboxEntry(user_id="ann")])
    async with worker_for(stores.deliveries, SETTINGS, Clock(at(20_000))) as running:
        await running.worker.run_once()
    [row] = await rows(pool)
    assert (row["state"], row["attempts"]) == ("due", 1)
    assert "connection failed" in row["last_error"]


async def test_ntfy_sent_with_its_token_and_refused_token_fails(
    stores: Stores, pool: asyncpg.Pool
) -> None:
    async with NtfyReceiver(token="tk_right") as ntfy:
        settings = delivery_settings(ntfy.url)
        await stores.targets.add_target("ann", NtfyTarget(ntfy.url, "lawn", "tk_right"))
        await stores.targets.add_target("bob", NtfyTarget(ntfy.url, "lawn", "tk_wrong"))
        await fan_out(stores, "k1", [InboxEntry(user_id="ann"), InboxEntry(user_id="bob")])
        async with worker_for(stores.deliveries, settings, Clock(at(20_000))) as running:
            assert await running.worker.run_once() == 2
        assert [p.authorization for p in ntfy.published] == ["Bearer tk_right"]
        assert ntfy.published[0].message["message"]
        assert sorted(r["state"] for r in await rows(pool)) == ["failed", "sent"]
        assert running.count("sent", "ntfy") == running.count("failed", "ntfy") == 1


async def test_a_new_delivery_is_sent_at_once_by_notify(
    stores: Stores, receiver: WebPushReceiver
) -> None:
    sub = receiver.subscribe()
    await register(stores, "ann", sub)
    # The poll is 30 s: only the NOTIFY can wake the worker within the second.
    settings = delivery_settings(notifications_delivery_poll_seconds=30.0)
    async with worker_for(stores.deliveries, settings, start=True):
        await asyncio.sleep(0.3)  # the worker listens
        for i in range(3):
            started = time.perf_counter()
            await fan_out(stores, f"k{i}", [InboxEntry(user_id="ann")])
            await receiver.wait_for(i + 1, timeout=1.0)
            assert time.perf_counter() - started < 1.0


async def test_the_quiet_hours_summary_goes_to_each_target(
    stores: Stores, receiver: WebPushReceiver
) -> None:
    quiet = QuietHours(start="10:00", end="14:00", allow_critical=True)
    prefs = Preferences(locale="de", timezone="UTC", scope="all", quiet_hours=quiet)
    await stores.preferences.put_preferences("ann", ACCOUNT, prefs)
    phone, laptop = receiver.subscribe(), receiver.subscribe()
    await register(stores, "ann", phone)
    await register(stores, "ann", laptop)
    for i in range(3):  # at 12:00 UTC and after: held
        held = [InboxEntry(user_id="ann", held_by_quiet_hours=True)]
        await fan_out(stores, f"k{i}", held, seconds=60 * i)
    clock = Clock(at(2 * 3600 - 1))  # 13:59:59
    async with worker_for(stores.deliveries, SETTINGS, clock) as running:
        assert await running.worker.run_once() == 0
        clock.advance(1)
        assert await running.worker.run_once() == 2
    titles = sorted(r.payload["title"] for r in receiver.received if r.payload)
    assert titles == ["3 Benachrichtigungen während der Ruhezeit"] * 2
    assert {r.subscription_id for r in receiver.received} == {phone.id, laptop.id}
