"""One contract for every ``Erasure``: subclass ``ErasureContract``, give ``stores``."""

from __future__ import annotations

import msgspec

from mowdeck.notifications.inbox.preferences import Preferences
from mowdeck.notifications.infra import Stores
from tests.unit.notifications.samples import ACCOUNT, MOWER, OTHER_MOWER, at
from tests.unit.notifications.stores import LEASE, deliver, event, queue, store_watches, watch_of


class ErasureContract:
    """Behaviour every adapter shares: what goes with a user, and with a mower."""

    async def test_deleting_a_user_deletes_their_preferences_and_inbox(
        self, stores: Stores
    ) -> None:
        await stores.preferences.put_preferences("amy", ACCOUNT, Preferences(scope="all"))
        await stores.preferences.put_preferences("bob", ACCOUNT, Preferences(scope="all"))
        await deliver(stores, event("a"), ["amy", "bob"])
        await deliver(stores, event("b", 1), ["amy"])
        assert await stores.erasure.delete_user("amy") == 3
        assert await stores.preferences.get_preferences("amy") is None
        assert (await stores.inbox.inbox_page("amy", 10)).items == []
        assert await stores.preferences.get_preferences("bob") is not None
        assert len((await stores.inbox.inbox_page("bob", 10)).items) == 1
        assert await stores.erasure.delete_user("amy") == 0

    async def test_forgetting_a_mower_deletes_what_is_about_it(self, stores: Stores) -> None:
        await store_watches(stores, [(watch_of(MOWER), 120), (watch_of(OTHER_MOWER), 120)])
        await deliver(stores, event("a"), ["amy"])
        await deliver(stores, event("b", mower_id=OTHER_MOWER), ["amy"])
        await queue(stores, event("c", 2), event("d", 3, mower_id=OTHER_MOWER))
        both = Preferences(scope="selected", mowers=[MOWER, OTHER_MOWER])
        await stores.preferences.put_preferences("amy", ACCOUNT, both)
        assert await stores.erasure.forget_mower(MOWER) == 3
        assert await stores.watches.read_watches([MOWER, OTHER_MOWER]) == {
            OTHER_MOWER: watch_of(OTHER_MOWER)
        }
        assert [i.dedupe_key for i in (await stores.inbox.inbox_page("amy", 10)).items] == ["b"]
        assert [
            p.event.dedupe_key for p in await stores.pending.claim_pending(at(0), 10, LEASE)
        ] == ["d"]
        assert await stores.preferences.get_preferences("amy") == msgspec.structs.replace(
            both, mowers=[OTHER_MOWER]
        )
        assert await stores.erasure.forget_mower(MOWER) == 0
