"""One contract for every ``TargetStore`` and ``DeliveryStore``: subclass
``DeliveryContract``, give ``stores``."""

from __future__ import annotations

from datetime import timedelta

import pytest

from mowdeck.notifications.delivery.model import ClaimedDelivery, DeliveryOutcome
from mowdeck.notifications.delivery.targets import (
    LogTarget,
    NtfyTarget,
    WebPushKeys,
    WebPushSubscription,
    WebPushTarget,
)
from mowdeck.notifications.inbox.model import Completion, InboxEntry
from mowdeck.notifications.inbox.preferences import Preferences
from mowdeck.notifications.infra import Stores
from mowdeck.notifications.rules.quiet import QuietHours
from tests.unit.notifications.samples import ACCOUNT, MOWER, at
from tests.unit.notifications.stores import LEASE, PARAMS, event, fan_out, queue

NOW = at(20_000)


def push(endpoint: str = "https://fcm.googleapis.com/fcm/send/a") -> WebPushTarget:
    """A Web Push target (the store does not check the keys)."""
    return WebPushTarget(WebPushSubscription(endpoint, WebPushKeys("p256dh", "auth")))


NTFY = NtfyTarget("https://ntfy.sh", "lawn", "tk_secret")


def outcome(c: ClaimedDelivery, result: str, **extra: object) -> DeliveryOutcome:
    return DeliveryOutcome(
        id=c.id,
        attempts=c.attempts,
        target_id=c.target_id,
        outcome=result,  # type: ignore[arg-type]
        **extra,  # type: ignore[arg-type]
    )


QUIET = Preferences(
    locale="de",
    timezone="UTC",
    scope="all",
    quiet_hours=QuietHours(start="10:00", end="14:00", allow_critical=True),
)


class DeliveryContract:
    """Targets and deliveries, on every adapter."""

    async def test_one_delivery_per_target_of_each_recipient(self, stores: Stores) -> None:
        web = await stores.targets.add_target("ann", push())
        ntfy = await stores.targets.add_target("ann", NTFY)
        await stores.targets.add_target("bob", push("https://fcm.googleapis.com/fcm/send/b"))
        await fan_out(stores, "k1", [InboxEntry(user_id="ann"), InboxEntry(user_id="cy")])
        claimed = await stores.deliveries.claim_deliveries(NOW, 10, LEASE)
        assert {(c.user_id, c.target_id, c.channel) for c in claimed} == {
            ("ann", web.id, "webpush"),
            ("ann", ntfy.id, "ntfy"),
        }
        first = claimed[0]
        assert (first.kind, first.mower_id, first.dedupe_key, first.attempts) == (
            "battery_low",
            MOWER,
            "k1",
            1,
        )
        assert first.params == PARAMS
        by_channel = {c.channel: c.target for c in claimed}
        assert by_channel["ntfy"]["token"] == "tk_secret"
        assert by_channel["webpush"]["subscription"]["endpoint"].endswith("/a")

    async def test_a_log_target_s_deliveries_go_to_the_log_channel(self, stores: Stores) -> None:
        log_target = await stores.targets.add_target("ann", LogTarget())
        await fan_out(stores, "k1", [InboxEntry(user_id="ann")])
        claimed = await stores.deliveries.claim_deliveries(NOW, 10, LEASE)
        assert [(c.target_id, c.channel) for c in claimed] == [(log_target.id, "log")]

    async def test_a_repeated_event_queues_nothing_more(self, stores: Stores) -> None:
        await stores.targets.add_target("ann", push())
        await fan_out(stores, "k1", [InboxEntry(user_id="ann")])
        await fan_out(stores, "k1", [InboxEntry(user_id="ann")])
        assert len(await stores.deliveries.claim_deliveries(NOW, 10, LEASE)) == 1

    async def test_held_items_make_one_summary_per_target(self, stores: Stores) -> None:
        await stores.preferences.put_preferences("ann", ACCOUNT, QUIET)
        await stores.targets.add_target("ann", push())
        await stores.targets.add_target("ann", NTFY)
        held = [InboxEntry(user_id="ann", held_by_quiet_hours=True)]
        await fan_out(stores, "k1", held)  # at 12:00 UTC, quiet 10:00 to 14:00
        await fan_out(stores, "k2", held, seconds=60)
        await fan_out(stores, "k3", held, seconds=120)
        assert await stores.deliveries.claim_deliveries(at(2 * 3600 - 1), 10, LEASE) == []
        summaries = await stores.deliveries.claim_deliveries(at(2 * 3600), 10, LEASE)
        assert len(summaries) == 2
        assert {(s.message_key, s.locale, s.mower_id) for s in summaries} == {
            ("quiet_summary", "de", None)
        }
        assert [s.params for s in summaries] == [{"count": 3}, {"count": 3}]

    async def test_a_batch_queues_deliveries_and_sums_held_items(self, stores: Stores) -> None:
        await stores.preferences.put_preferences("ann", ACCOUNT, QUIET)
        await stores.targets.add_target("ann", push())
        await stores.targets.add_target("bob", NTFY)
        await queue(stores, *(event(k, s, params=PARAMS) for k, s in [("k1", 0), ("k2", 60)]))
        await queue(stores, event("k3", 120, params=PARAMS))
        claimed = await stores.pending.claim_pending(at(10_000), 10, LEASE)
        entries = (InboxEntry(user_id="ann", held_by_quiet_hours=True), InboxEntry(user_id="bob"))
        done = [Completion(pending_id=p.id, event=p.event, entries=entries) for p in claimed]
        await stores.pending.complete_many(done, 200)
        now = await stores.deliveries.claim_deliveries(
            at(3600), 10, LEASE
        )  # quiet until 14:00 (at 7200)
        assert sorted((d.user_id, d.dedupe_key) for d in now) == [
            ("bob", "k1"),
            ("bob", "k2"),
            ("bob", "k3"),
        ]
        later = await stores.deliveries.claim_deliveries(at(2 * 3600), 10, LEASE)
        [summary] = [d for d in later if d.user_id == "ann"]  # bob's come back after the lease
        assert (summary.user_id, summary.message_key, summary.params) == (
            "ann",
            "quiet_summary",
            {"count": 3},
        )

    async def test_a_claim_holds_rows_for_its_lease(self, stores: Stores) -> None:
        await stores.targets.add_target("ann", push())
        await fan_out(stores, "k1", [InboxEntry(user_id="ann")])
        [first] = await stores.deliveries.claim_deliveries(NOW, 10, LEASE)
        assert (
            await stores.deliveries.claim_deliveries(NOW + LEASE - timedelta(seconds=1), 10, LEASE)
            == []
        )
        [again] = await stores.deliveries.claim_deliveries(NOW + LEASE, 10, LEASE)
        assert (again.id, again.attempts) == (first.id, 2)

    async def test_sent_and_failed_finish_retry_comes_back(self, stores: Stores) -> None:
        await stores.targets.add_target("ann", push())
        for key in ("k1", "k2", "k3"):
            await fan_out(stores, key, [InboxEntry(user_id="ann")])
        sent, failed, retried = await stores.deliveries.claim_deliveries(NOW, 10, LEASE)
        later = NOW + timedelta(seconds=30)
        await stores.deliveries.record_deliveries(
            NOW,
            [
                outcome(sent, "sent"),
                outcome(failed, "failed", error="HTTP 400"),
                outcome(retried, "retry", next_attempt_at=later, error="HTTP 503"),
            ],
        )
        assert (
            await stores.deliveries.claim_deliveries(later - timedelta(seconds=1), 10, LEASE) == []
        )
        assert (await stores.deliveries.delivery_backlog(later)).due == 1
        [back] = await stores.deliveries.claim_deliveries(later, 10, LEASE)
        assert (back.id, back.attempts) == (retried.id, 2)
        assert (
            await stores.deliveries.delivery_backlog(later + LEASE - timedelta(seconds=1))
        ).due == 0

    async def test_a_stale_claims_result_is_ignored(self, stores: Stores) -> None:
        await stores.targets.add_target("ann", push())
        await fan_out(stores, "k1", [InboxEntry(user_id="ann")])
        [old] = await stores.deliveries.claim_deliveries(NOW, 10, LEASE)
        [new] = await stores.deliveries.claim_deliveries(NOW + LEASE, 10, LEASE)
        await stores.deliveries.record_deliveries(NOW, [outcome(old, "failed", error="late")])
        await stores.deliveries.record_deliveries(NOW, [outcome(new, "sent")])
        backlog = await stores.deliveries.delivery_backlog(NOW + LEASE * 3)
        assert backlog.due == 0
        assert await stores.deliveries.prune_deliveries(NOW + timedelta(seconds=1)) == 1

    async def test_gone_deletes_the_target_and_its_deliveries(self, stores: Stores) -> None:
        web = await stores.targets.add_target("ann", push())
        await stores.targets.add_target("ann", NTFY)
        for key in ("k1", "k2"):
            await fan_out(stores, key, [InboxEntry(user_id="ann")])
        claimed = await stores.deliveries.claim_deliveries(NOW, 10, LEASE)
        assert len(claimed) == 4
        webpush = next(c for c in claimed if c.channel == "webpush")
        await stores.deliveries.record_deliveries(NOW, [outcome(webpush, "gone")])
        assert web.id not in {t.id for t in await stores.targets.list_targets("ann")}
        rest = await stores.deliveries.claim_deliveries(NOW + LEASE, 10, LEASE)
        assert {c.channel for c in rest} == {"ntfy"}

    async def test_a_push_endpoint_belongs_to_its_last_registrant(self, stores: Stores) -> None:
        await stores.targets.add_target("ann", push())
        await fan_out(stores, "k1", [InboxEntry(user_id="ann")])
        again = await stores.targets.add_target("ann", push())
        assert [t.id for t in await stores.targets.list_targets("ann")] == [again.id]
        moved = await stores.targets.add_target("bob", push())
        assert await stores.targets.list_targets("ann") == []
        assert [t.id for t in await stores.targets.list_targets("bob")] == [moved.id]
        # Ann's notification does not go to what is now Bob's browser.
        assert await stores.deliveries.claim_deliveries(NOW, 10, LEASE) == []

    async def test_only_the_owner_deletes_a_target(self, stores: Stores) -> None:
        target = await stores.targets.add_target("ann", NTFY)
        assert not await stores.targets.delete_target("bob", target.id)
        assert await stores.targets.delete_target("ann", target.id)
        assert await stores.targets.list_targets("ann") == []
        assert not await stores.targets.delete_target("ann", target.id)

    async def test_pruning_keeps_due_and_recent_rows(self, stores: Stores) -> None:
        await stores.targets.add_target("ann", push())
        for key in ("k1", "k2", "k3"):
            await fan_out(stores, key, [InboxEntry(user_id="ann")])
        done, recent, _due = await stores.deliveries.claim_deliveries(NOW, 10, LEASE)
        await stores.deliveries.record_deliveries(NOW, [outcome(done, "sent")])
        await stores.deliveries.record_deliveries(
            NOW + timedelta(days=2), [outcome(recent, "failed")]
        )
        assert await stores.deliveries.prune_deliveries(NOW + timedelta(days=1)) == 1
        assert await stores.deliveries.prune_deliveries(NOW + timedelta(days=1)) == 0
        assert (await stores.deliveries.delivery_backlog(NOW + LEASE)).due == 1

    async def test_a_deleted_user_takes_targets_and_deliveries(self, stores: Stores) -> None:
        await stores.targets.add_target("ann", push())
        await fan_out(stores, "k1", [InboxEntry(user_id="ann")])
        await stores.erasure.delete_user("ann")
        assert await stores.targets.list_targets("ann") == []
        assert (await stores.deliveries.delivery_backlog(NOW)).due == 0

    async def test_listeners_hear_of_new_deliveries(self, stores: Stores) -> None:
        woken: list[int] = []
        stop = await stores.deliveries.listen_deliveries(lambda: woken.append(1))
        try:
            await stores.targets.add_target("ann", push())
            await fan_out(stores, "k1", [InboxEntry(user_id="ann")])
            await _until(lambda: bool(woken))
        finally:
            await stop()


async def _until(condition: object, timeout: float = 5.0) -> None:
    import asyncio  # noqa: PLC0415 - only this helper waits

    assert callable(condition)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            pytest.fail("condition not reached")
        await asyncio.sleep(0.01)
