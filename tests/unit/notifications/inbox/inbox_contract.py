"""One contract for the inbox's ``PendingStore`` and ``InboxStore``: subclass
``InboxContract``, give ``stores``."""

from __future__ import annotations

import uuid

from mowdeck.notifications.inbox.model import Completion, InboxCursor, InboxEntry
from mowdeck.notifications.infra import Stores
from tests.unit.notifications.samples import ACCOUNT, MOWER, at
from tests.unit.notifications.stores import LEASE, deliver, event, queue, store_watches, watch_of


class InboxContract:
    """Behaviour every adapter shares."""

    # -- pending events ----------------------------------------------------------------

    async def test_pending_events_come_back_as_written(self, stores: Stores) -> None:
        ev = event(params={"battery": 18, "ratio": 0.5, "code": "E\u00e9"})
        await store_watches(stores, [(watch_of(), None)], [ev, event("k2", 5)])
        claimed = await stores.pending.claim_pending(at(0), 10, LEASE)
        assert [p.event for p in claimed] == [ev, event("k2", 5)]
        assert [p.attempts for p in claimed] == [1, 1]
        assert claimed[0].id < claimed[1].id

    async def test_a_claim_holds_for_its_lease(self, stores: Stores) -> None:
        await queue(stores, event("a"), event("b"), event("c"))
        first = await stores.pending.claim_pending(at(0), 2, LEASE)
        assert [p.event.dedupe_key for p in first] == ["a", "b"]
        second = await stores.pending.claim_pending(at(59), 10, LEASE)
        assert [p.event.dedupe_key for p in second] == ["c"]
        assert await stores.pending.claim_pending(at(59), 10, LEASE) == []
        again = await stores.pending.claim_pending(at(60), 10, LEASE)
        assert [(p.event.dedupe_key, p.attempts) for p in again] == [("a", 2), ("b", 2)]

    async def test_a_completed_event_is_gone(self, stores: Stores) -> None:
        await queue(stores, event())
        [pending] = await stores.pending.claim_pending(at(0), 10, LEASE)
        await stores.pending.complete_pending(pending.id, pending.event, [], 200)
        assert await stores.pending.claim_pending(at(10**6), 10, LEASE) == []

    async def test_a_discarded_event_is_gone(self, stores: Stores) -> None:
        await queue(stores, event())
        [pending] = await stores.pending.claim_pending(at(0), 10, LEASE)
        assert await stores.pending.discard_pending(pending.id)
        assert not await stores.pending.discard_pending(pending.id)
        assert await stores.pending.claim_pending(at(10**6), 10, LEASE) == []

    # -- the inbox ---------------------------------------------------------------------

    async def test_completion_writes_one_item_per_user(self, stores: Stores) -> None:
        ev = event("battery:1", 5)
        await queue(stores, ev)
        [pending] = await stores.pending.claim_pending(at(0), 10, LEASE)
        entries = [InboxEntry(user_id="bob", held_by_quiet_hours=True), InboxEntry(user_id="amy")]
        items = await stores.pending.complete_pending(pending.id, ev, entries, 200)
        assert sorted((i.user_id, i.held_by_quiet_hours) for i in items) == [
            ("amy", False),
            ("bob", True),
        ]
        [item] = (await stores.inbox.inbox_page("bob", 10)).items
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

    async def test_a_batch_completes_several_events_at_once(self, stores: Stores) -> None:
        await queue(stores, event("a", 1), event("b", 2), event("a", 3), event("c", 4))
        claimed = await stores.pending.claim_pending(at(0), 10, LEASE)
        users = [["amy", "bob"], ["amy"], ["amy", "cy"], []]
        done = [
            Completion(
                pending_id=p.id, event=p.event, entries=tuple(InboxEntry(user_id=u) for u in us)
            )
            for p, us in zip(claimed, users, strict=True)
        ]
        written = await stores.pending.complete_many(done, 200)
        # The later "a" event gives amy nothing (the earlier one took the key), cy an item.
        assert [sorted((i.user_id, i.occurred_at) for i in items) for items in written] == [
            [("amy", at(1)), ("bob", at(1))],
            [("amy", at(2))],
            [("cy", at(3))],
            [],
        ]
        assert await stores.pending.claim_pending(at(10**6), 10, LEASE) == []
        assert [i.dedupe_key for i in (await stores.inbox.inbox_page("amy", 10)).items] == [
            "b",
            "a",
        ]
        assert await stores.pending.complete_many([], 200) == []

    async def test_a_batch_trims_once_after_every_insert(self, stores: Stores) -> None:
        await queue(stores, event("a", 1), event("b", 2), event("c", 3))
        claimed = await stores.pending.claim_pending(at(0), 10, LEASE)
        amy = (InboxEntry(user_id="amy"),)
        done = [Completion(pending_id=p.id, event=p.event, entries=amy) for p in claimed]
        written = await stores.pending.complete_many(done, 2)
        assert [[i.dedupe_key for i in items] for items in written] == [[], ["b"], ["c"]]
        assert [i.dedupe_key for i in (await stores.inbox.inbox_page("amy", 10)).items] == [
            "c",
            "b",
        ]

    async def test_a_repeated_event_is_stored_once(self, stores: Stores) -> None:
        assert await deliver(stores, event("once"), ["amy", "bob"]) == ["amy", "bob"]
        assert await deliver(stores, event("once"), ["amy", "bob", "cy"]) == ["cy"]
        assert len((await stores.inbox.inbox_page("amy", 10)).items) == 1

    async def test_the_inbox_keeps_the_newest_items(self, stores: Stores) -> None:
        for n in range(5):
            await deliver(stores, event(f"k{n}", n), ["amy", "bob"] if n < 2 else ["amy"], limit=3)
        page = await stores.inbox.inbox_page("amy", 10)
        assert [i.dedupe_key for i in page.items] == ["k4", "k3", "k2"]
        # Only users who got a new item are trimmed.
        assert len((await stores.inbox.inbox_page("bob", 10)).items) == 2
        # An item older than the newest ``limit`` is trimmed at once and not reported new.
        assert await deliver(stores, event("old", -10), ["amy"], limit=3) == []
        assert len((await stores.inbox.inbox_page("amy", 10)).items) == 3

    async def test_pages_run_newest_first_behind_the_cursor(self, stores: Stores) -> None:
        # Two items at the same instant: the id decides, as the cursor does.
        for key, seconds in [("a", 0), ("b", 10), ("c", 10), ("d", 20), ("e", 30)]:
            await deliver(stores, event(key, seconds), ["amy"])
        first = await stores.inbox.inbox_page("amy", 2)
        assert len(first.items) == 2
        assert first.next is not None
        second = await stores.inbox.inbox_page("amy", 2, first.next)
        assert second.next is not None
        third = await stores.inbox.inbox_page("amy", 2, InboxCursor.decode(second.next.encode()))
        assert third.next is None
        keys = [i.dedupe_key for p in (first, second, third) for i in p.items]
        assert keys[:2] == ["e", "d"]
        assert set(keys[2:4]) == {"b", "c"}
        assert keys[4] == "a"
        everything = await stores.inbox.inbox_page("amy", 10)
        assert [i.dedupe_key for i in everything.items] == keys
        assert everything.next is None
        assert (await stores.inbox.inbox_page("nobody", 10)).items == []

    async def test_only_the_owner_marks_an_item_read(self, stores: Stores) -> None:
        await deliver(stores, event("a"), ["amy", "bob"])
        await deliver(stores, event("b", 1), ["amy"])
        amy = (await stores.inbox.inbox_page("amy", 10)).items
        bob = (await stores.inbox.inbox_page("bob", 10)).items
        assert await stores.inbox.unread_count("amy") == 2
        assert await stores.inbox.mark_read("bob", [amy[0].id, bob[0].id]) == {bob[0].id}
        assert await stores.inbox.unread_count("amy") == 2
        assert await stores.inbox.unread_count("bob") == 0
        assert await stores.inbox.mark_read("amy", [amy[1].id, uuid.uuid4()]) == {amy[1].id}
        assert [i.read for i in (await stores.inbox.inbox_page("amy", 10)).items] == [False, True]
        assert await stores.inbox.mark_read("amy", []) == set()
