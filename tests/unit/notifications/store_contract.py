"""One contract for every ``NotificationStore``: subclass ``StoreContract``, give a ``store``."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import msgspec
import pytest

from mowdeck.notifications.inbox.model import Completion, InboxCursor, InboxEntry, Stamp, WatchWrite
from mowdeck.notifications.inbox.ports import NotificationStore
from mowdeck.notifications.inbox.preferences import Preferences
from mowdeck.notifications.rules.events import RuleEvent
from mowdeck.notifications.rules.kinds import SEVERITY, Kind
from mowdeck.notifications.rules.quiet import QuietHours
from mowdeck.notifications.rules.watch import MowerWatch
from tests.unit.notifications.samples import (
    ACCOUNT,
    MOWER,
    OTHER_ACCOUNT,
    OTHER_MOWER,
    at,
    first_watch,
)

LEASE = timedelta(seconds=60)
THIRD_MOWER = uuid.UUID("00000000-0000-4000-8000-000000000003")


def watch_of(mower_id: uuid.UUID = MOWER, seconds: float = 0, **fields: Any) -> MowerWatch:
    """The watch a first state of ``mower_id`` at ``seconds`` starts."""
    return first_watch(seconds, mower_id=mower_id, **fields)


def event(
    key: str = "k",
    seconds: float = 0,
    *,
    kind: Kind = "battery_low",
    mower_id: uuid.UUID = MOWER,
    params: dict[str, Any] | None = None,
) -> RuleEvent:
    """An event with dedupe key ``key`` occurring at ``seconds``."""
    return RuleEvent(
        kind=kind,
        mower_id=mower_id,
        account_id=ACCOUNT,
        severity=SEVERITY[kind],
        dedupe_key=key,
        message_key=kind,
        params={"battery": 18} if params is None else params,
        occurred_at=at(seconds),
    )


async def store_watches(
    store: NotificationStore,
    writes: list[tuple[MowerWatch, float | None]],
    events: list[RuleEvent] = (),  # type: ignore[assignment]
) -> None:
    """Lock, write and commit watches with their due seconds, and pending events."""
    async with store.watches() as tx:
        await tx.lock([w.mower_id for w, _ in writes] or [MOWER])
        await tx.write(
            [WatchWrite(w, None if due is None else at(due)) for w, due in writes], events
        )


async def queue(store: NotificationStore, *events: RuleEvent) -> None:
    """Pending events, written as a rules transaction writes them."""
    await store_watches(store, [], list(events))


async def deliver(
    store: NotificationStore, ev: RuleEvent, users: list[str], limit: int = 200
) -> list[str]:
    """Queue ``ev``, claim it and complete it for ``users``; the users with a new item."""
    await queue(store, ev)
    [pending] = await store.claim_pending(at(10_000), 10, LEASE)
    items = await store.complete_pending(
        pending.id, pending.event, [InboxEntry(user_id=u) for u in users], limit
    )
    return sorted(i.user_id for i in items)


class StoreContract:
    """Behaviour every adapter shares."""

    # -- watches ---------------------------------------------------------------------

    async def test_a_watch_round_trips(self, store: NotificationStore) -> None:
        watch = watch_of(activity="mowing", battery=10)
        await store_watches(store, [(watch, 120)])
        assert await store.read_watches([MOWER, OTHER_MOWER]) == {MOWER: watch}
        async with store.watches() as tx:
            assert await tx.lock([OTHER_MOWER, MOWER]) == {MOWER: watch}

    async def test_a_written_watch_replaces_the_stored_one(self, store: NotificationStore) -> None:
        await store_watches(store, [(watch_of(), 120)])
        newer = watch_of(seconds=50, battery=40)
        await store_watches(store, [(newer, 170)])
        assert await store.read_watches([MOWER]) == {MOWER: newer}

    async def test_the_last_write_of_a_mower_wins(self, store: NotificationStore) -> None:
        first, last = watch_of(battery=50), watch_of(seconds=5, battery=49)
        async with store.watches() as tx:
            await tx.lock([MOWER])
            await tx.write([WatchWrite(first, at(120)), WatchWrite(last, at(125))], [])
        assert await store.read_watches([MOWER]) == {MOWER: last}

    async def test_a_watch_must_be_locked_to_be_written(self, store: NotificationStore) -> None:
        async with store.watches() as tx:
            await tx.lock([OTHER_MOWER])
            with pytest.raises(ValueError, match="without locking"):
                await tx.write([WatchWrite(watch_of(), None)], [])
        assert await store.read_watches([MOWER]) == {}

    async def test_a_failed_transaction_leaves_nothing(self, store: NotificationStore) -> None:
        async def failing() -> None:
            async with store.watches() as tx:
                await tx.lock([MOWER])
                await tx.write([WatchWrite(watch_of(), at(120))], [event()])
                raise RuntimeError("the batch failed after writing")

        with pytest.raises(RuntimeError):
            await failing()
        assert await store.read_watches([MOWER]) == {}
        assert await store.claim_pending(at(0), 10, LEASE) == []

    async def test_the_scan_claims_due_watches_most_overdue_first(
        self, store: NotificationStore
    ) -> None:
        await store_watches(
            store,
            [
                (watch_of(MOWER), 120),
                (watch_of(OTHER_MOWER), 100),
                (watch_of(THIRD_MOWER), None),
            ],
        )
        async with store.watches() as tx:
            assert await tx.claim_due(at(99), 10) == []
            claimed = await tx.claim_due(at(500), 1)
            assert [w.mower_id for w in claimed] == [OTHER_MOWER]
        async with store.watches() as tx:
            claimed = await tx.claim_due(at(500), 10)
            assert [w.mower_id for w in claimed] == [OTHER_MOWER, MOWER]

    async def test_a_state_batch_only_moves_the_silence_earlier(
        self, store: NotificationStore
    ) -> None:
        await store_watches(store, [(watch_of(), 120)])
        # Later and "never" do not postpone the stored time: the scan corrects it.
        await store_watches(store, [(watch_of(seconds=10), 130)])
        await store_watches(store, [(watch_of(seconds=20), None)])
        async with store.watches() as tx:
            assert [w.mower_id for w in await tx.claim_due(at(120), 10)] == [MOWER]
        await store_watches(store, [(watch_of(seconds=30), 60)])
        async with store.watches() as tx:
            assert [w.mower_id for w in await tx.claim_due(at(60), 10)] == [MOWER]

    async def test_the_scan_stores_its_own_time(self, store: NotificationStore) -> None:
        await store_watches(store, [(watch_of(), 120), (watch_of(OTHER_MOWER), 120)])
        async with store.watches() as tx:
            claimed = await tx.claim_due(at(120), 10)
            await tx.write(
                [WatchWrite(claimed[0], at(300)), WatchWrite(claimed[1], None)], [event()]
            )
        async with store.watches() as tx:
            assert await tx.claim_due(at(299), 10) == []
            assert [w.mower_id for w in await tx.claim_due(at(10**6), 10)] == [claimed[0].mower_id]
        assert len(await store.claim_pending(at(0), 10, LEASE)) == 1

    async def test_a_stamp_counts_the_writes_that_change_the_watch(
        self, store: NotificationStore
    ) -> None:
        await store_watches(store, [(watch_of(), 120)])
        async with store.watches() as tx:
            assert await tx.lock_versions([OTHER_MOWER, MOWER]) == {MOWER: Stamp(0, at(0))}
        await store_watches(store, [(watch_of(seconds=10, battery=70), 130)])
        async with store.watches() as tx:
            assert await tx.lock_versions([MOWER]) == {MOWER: Stamp(1, at(10))}
            # The scan found nothing: only the due time is new, not the version.
            [claimed] = await tx.claim_due(at(10**6), 10)
        async with store.watches() as tx:
            [claimed] = await tx.claim_due(at(10**6), 10)
            await tx.write([WatchWrite(claimed, at(500), changed=False)], [])
        async with store.watches() as tx:
            assert await tx.lock_versions([MOWER]) == {MOWER: Stamp(1, at(10))}
            assert await tx.claim_due(at(499), 10) == []
            assert [w.mower_id for w in await tx.claim_due(at(500), 10)] == [MOWER]

    async def test_a_touch_moves_only_the_contact(self, store: NotificationStore) -> None:
        watch = watch_of(battery=70)
        await store_watches(store, [(watch, 120)])
        heard = msgspec.structs.replace(watch, observed_at=at(10), contact_at=at(11))
        async with store.watches() as tx:
            await tx.lock_versions([MOWER])
            await tx.touch([heard])
        assert await store.read_watches([MOWER]) == {MOWER: heard}
        async with store.watches() as tx:
            assert await tx.lock_versions([MOWER]) == {MOWER: Stamp(0, at(10))}
            assert await tx.lock([MOWER]) == {MOWER: heard}
            # The due time stayed: a later contact only makes the exact one later.
            assert await tx.claim_due(at(120), 10) == [heard]

    async def test_contact_never_goes_back(self, store: NotificationStore) -> None:
        watch = watch_of(battery=70)
        await store_watches(store, [(watch, 120)])
        newer = msgspec.structs.replace(watch, observed_at=at(20), contact_at=at(21))
        older = msgspec.structs.replace(watch, observed_at=at(10), contact_at=at(11))
        for heard in (newer, older):
            async with store.watches() as tx:
                await tx.lock_versions([MOWER])
                await tx.touch([heard])
        assert await store.read_watches([MOWER]) == {MOWER: newer}
        # A whole write planned on an older contact keeps the newer one too.
        async with store.watches() as tx:
            await tx.lock([MOWER])
            await tx.write([WatchWrite(msgspec.structs.replace(older, battery=60), at(130))], [])
        [stored] = (await store.read_watches([MOWER])).values()
        assert (stored.battery, stored.observed_at, stored.contact_at) == (60, at(20), at(21))

    async def test_a_watch_must_be_locked_to_be_touched(self, store: NotificationStore) -> None:
        await store_watches(store, [(watch_of(), 120), (watch_of(OTHER_MOWER), 120)])
        heard = msgspec.structs.replace(watch_of(), observed_at=at(10), contact_at=at(11))
        async with store.watches() as tx:
            await tx.lock_versions([OTHER_MOWER])
            with pytest.raises(ValueError, match="without locking"):
                await tx.touch([heard])
        assert await store.read_watches([MOWER]) == {MOWER: watch_of()}

    # -- pending events ----------------------------------------------------------------

    async def test_pending_events_come_back_as_written(self, store: NotificationStore) -> None:
        ev = event(params={"battery": 18, "ratio": 0.5, "code": "E\u00e9"})
        await store_watches(store, [(watch_of(), None)], [ev, event("k2", 5)])
        claimed = await store.claim_pending(at(0), 10, LEASE)
        assert [p.event for p in claimed] == [ev, event("k2", 5)]
        assert [p.attempts for p in claimed] == [1, 1]
        assert claimed[0].id < claimed[1].id

    async def test_a_claim_holds_for_its_lease(self, store: NotificationStore) -> None:
        await queue(store, event("a"), event("b"), event("c"))
        first = await store.claim_pending(at(0), 2, LEASE)
        assert [p.event.dedupe_key for p in first] == ["a", "b"]
        second = await store.claim_pending(at(59), 10, LEASE)
        assert [p.event.dedupe_key for p in second] == ["c"]
        assert await store.claim_pending(at(59), 10, LEASE) == []
        again = await store.claim_pending(at(60), 10, LEASE)
        assert [(p.event.dedupe_key, p.attempts) for p in again] == [("a", 2), ("b", 2)]

    async def test_a_completed_event_is_gone(self, store: NotificationStore) -> None:
        await queue(store, event())
        [pending] = await store.claim_pending(at(0), 10, LEASE)
        await store.complete_pending(pending.id, pending.event, [], 200)
        assert await store.claim_pending(at(10**6), 10, LEASE) == []

    async def test_a_discarded_event_is_gone(self, store: NotificationStore) -> None:
        await queue(store, event())
        [pending] = await store.claim_pending(at(0), 10, LEASE)
        assert await store.discard_pending(pending.id)
        assert not await store.discard_pending(pending.id)
        assert await store.claim_pending(at(10**6), 10, LEASE) == []

    # -- the inbox ---------------------------------------------------------------------

    async def test_completion_writes_one_item_per_user(self, store: NotificationStore) -> None:
        ev = event("battery:1", 5)
        await queue(store, ev)
        [pending] = await store.claim_pending(at(0), 10, LEASE)
        entries = [InboxEntry(user_id="bob", held_by_quiet_hours=True), InboxEntry(user_id="amy")]
        items = await store.complete_pending(pending.id, ev, entries, 200)
        assert sorted((i.user_id, i.held_by_quiet_hours) for i in items) == [
            ("amy", False),
            ("bob", True),
        ]
        [item] = (await store.inbox_page("bob", 10)).items
        assert item == next(i for i in items if i.user_id == "bob")
        assert (item.kind, item.severity, item.mower_id, item.account_id) == (
            "battery_low",
            "warning",
            MOWER,
            ACCOUNT,
        )
        assert (item.dedupe_key, item.message_key, item.params) == (
            "battery:1",
            "battery_low",
            {"battery": 18},
        )
        assert item.occurred_at == at(5)
        assert not item.read

    async def test_a_batch_completes_several_events_at_once(self, store: NotificationStore) -> None:
        await queue(store, event("a", 1), event("b", 2), event("a", 3), event("c", 4))
        claimed = await store.claim_pending(at(0), 10, LEASE)
        users = [["amy", "bob"], ["amy"], ["amy", "cy"], []]
        done = [
            Completion(
                pending_id=p.id, event=p.event, entries=tuple(InboxEntry(user_id=u) for u in us)
            )
            for p, us in zip(claimed, users, strict=True)
        ]
        written = await store.complete_many(done, 200)
        # The later "a" event gives amy nothing (the earlier one took the key), cy an item.
        assert [sorted((i.user_id, i.occurred_at) for i in items) for items in written] == [
            [("amy", at(1)), ("bob", at(1))],
            [("amy", at(2))],
            [("cy", at(3))],
            [],
        ]
        assert await store.claim_pending(at(10**6), 10, LEASE) == []
        assert [i.dedupe_key for i in (await store.inbox_page("amy", 10)).items] == ["b", "a"]
        assert await store.complete_many([], 200) == []

    async def test_a_batch_trims_once_after_every_insert(self, store: NotificationStore) -> None:
        await queue(store, event("a", 1), event("b", 2), event("c", 3))
        claimed = await store.claim_pending(at(0), 10, LEASE)
        amy = (InboxEntry(user_id="amy"),)
        done = [Completion(pending_id=p.id, event=p.event, entries=amy) for p in claimed]
        written = await store.complete_many(done, 2)
        assert [[i.dedupe_key for i in items] for items in written] == [[], ["b"], ["c"]]
        assert [i.dedupe_key for i in (await store.inbox_page("amy", 10)).items] == ["c", "b"]

    async def test_a_repeated_event_is_stored_once(self, store: NotificationStore) -> None:
        assert await deliver(store, event("once"), ["amy", "bob"]) == ["amy", "bob"]
        assert await deliver(store, event("once"), ["amy", "bob", "cy"]) == ["cy"]
        assert len((await store.inbox_page("amy", 10)).items) == 1

    async def test_the_inbox_keeps_the_newest_items(self, store: NotificationStore) -> None:
        for n in range(5):
            await deliver(store, event(f"k{n}", n), ["amy", "bob"] if n < 2 else ["amy"], limit=3)
        page = await store.inbox_page("amy", 10)
        assert [i.dedupe_key for i in page.items] == ["k4", "k3", "k2"]
        # Only users who got a new item are trimmed.
        assert len((await store.inbox_page("bob", 10)).items) == 2
        # An item older than the newest ``limit`` is trimmed at once and not reported new.
        assert await deliver(store, event("old", -10), ["amy"], limit=3) == []
        assert len((await store.inbox_page("amy", 10)).items) == 3

    async def test_pages_run_newest_first_behind_the_cursor(self, store: NotificationStore) -> None:
        # Two items at the same instant: the id decides, as the cursor does.
        for key, seconds in [("a", 0), ("b", 10), ("c", 10), ("d", 20), ("e", 30)]:
            await deliver(store, event(key, seconds), ["amy"])
        first = await store.inbox_page("amy", 2)
        assert len(first.items) == 2
        assert first.next is not None
        second = await store.inbox_page("amy", 2, first.next)
        assert second.next is not None
        third = await store.inbox_page("amy", 2, InboxCursor.decode(second.next.encode()))
        assert third.next is None
        keys = [i.dedupe_key for p in (first, second, third) for i in p.items]
        assert keys[:2] == ["e", "d"]
        assert set(keys[2:4]) == {"b", "c"}
        assert keys[4] == "a"
        everything = await store.inbox_page("amy", 10)
        assert [i.dedupe_key for i in everything.items] == keys
        assert everything.next is None
        assert (await store.inbox_page("nobody", 10)).items == []

    async def test_only_the_owner_marks_an_item_read(self, store: NotificationStore) -> None:
        await deliver(store, event("a"), ["amy", "bob"])
        await deliver(store, event("b", 1), ["amy"])
        amy = (await store.inbox_page("amy", 10)).items
        bob = (await store.inbox_page("bob", 10)).items
        assert await store.unread_count("amy") == 2
        assert await store.mark_read("bob", [amy[0].id, bob[0].id]) == {bob[0].id}
        assert await store.unread_count("amy") == 2
        assert await store.unread_count("bob") == 0
        assert await store.mark_read("amy", [amy[1].id, uuid.uuid4()]) == {amy[1].id}
        assert [i.read for i in (await store.inbox_page("amy", 10)).items] == [False, True]
        assert await store.mark_read("amy", []) == set()

    # -- preferences -------------------------------------------------------------------

    async def test_preferences_round_trip(self, store: NotificationStore) -> None:
        assert await store.get_preferences("amy") is None
        prefs = Preferences(
            locale="de",
            timezone="Europe/Berlin",
            scope="selected",
            mowers=[OTHER_MOWER, MOWER],
            kinds={"job_started": True, "battery_low": False},
            quiet_hours=QuietHours(start="22:00", end="07:00", allow_critical=False),
        )
        await store.put_preferences("amy", ACCOUNT, prefs)
        assert await store.get_preferences("amy") == prefs
        plain = Preferences(scope="all")
        await store.put_preferences("amy", ACCOUNT, plain)
        assert await store.get_preferences("amy") == plain

    async def test_subscribers_are_the_accounts_users_with_a_scope(
        self, store: NotificationStore
    ) -> None:
        await store.put_preferences("cy", ACCOUNT, Preferences(scope="all"))
        await store.put_preferences("amy", ACCOUNT, Preferences(scope="selected", mowers=[MOWER]))
        await store.put_preferences("bob", ACCOUNT, Preferences(scope="none"))
        await store.put_preferences("dan", OTHER_ACCOUNT, Preferences(scope="all"))
        subscribers = await store.subscribers(ACCOUNT)
        assert [(s.user_id, s.account_id) for s in subscribers] == [
            ("amy", ACCOUNT),
            ("cy", ACCOUNT),
        ]
        assert subscribers[0].preferences.mowers == [MOWER]
        third = uuid.uuid4()
        found = await store.subscribers_of([OTHER_ACCOUNT, ACCOUNT, third])
        assert {a: [s.user_id for s in subs] for a, subs in found.items()} == {
            ACCOUNT: ["amy", "cy"],
            OTHER_ACCOUNT: ["dan"],
            third: [],
        }
        assert found[ACCOUNT] == subscribers

    # -- removal -----------------------------------------------------------------------

    async def test_deleting_a_user_deletes_their_preferences_and_inbox(
        self, store: NotificationStore
    ) -> None:
        await store.put_preferences("amy", ACCOUNT, Preferences(scope="all"))
        await store.put_preferences("bob", ACCOUNT, Preferences(scope="all"))
        await deliver(store, event("a"), ["amy", "bob"])
        await deliver(store, event("b", 1), ["amy"])
        assert await store.delete_user("amy") == 3
        assert await store.get_preferences("amy") is None
        assert (await store.inbox_page("amy", 10)).items == []
        assert await store.get_preferences("bob") is not None
        assert len((await store.inbox_page("bob", 10)).items) == 1
        assert await store.delete_user("amy") == 0

    async def test_forgetting_a_mower_deletes_what_is_about_it(
        self, store: NotificationStore
    ) -> None:
        await store_watches(store, [(watch_of(MOWER), 120), (watch_of(OTHER_MOWER), 120)])
        await deliver(store, event("a"), ["amy"])
        await deliver(store, event("b", mower_id=OTHER_MOWER), ["amy"])
        await queue(store, event("c", 2), event("d", 3, mower_id=OTHER_MOWER))
        both = Preferences(scope="selected", mowers=[MOWER, OTHER_MOWER])
        await store.put_preferences("amy", ACCOUNT, both)
        assert await store.forget_mower(MOWER) == 3
        assert await store.read_watches([MOWER, OTHER_MOWER]) == {
            OTHER_MOWER: watch_of(OTHER_MOWER)
        }
        assert [i.dedupe_key for i in (await store.inbox_page("amy", 10)).items] == ["b"]
        assert [p.event.dedupe_key for p in await store.claim_pending(at(0), 10, LEASE)] == ["d"]
        assert await store.get_preferences("amy") == msgspec.structs.replace(
            both, mowers=[OTHER_MOWER]
        )
        assert await store.forget_mower(MOWER) == 0
