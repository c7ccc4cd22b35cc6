"""One contract for every ``PreferencesStore``: subclass ``PreferencesContract``, give
``stores``."""

from __future__ import annotations

import uuid

from mowdeck.notifications.inbox.preferences import Preferences
from mowdeck.notifications.infra import Stores
from mowdeck.notifications.rules.quiet import QuietHours
from tests.unit.notifications.samples import ACCOUNT, MOWER, OTHER_ACCOUNT, OTHER_MOWER


class PreferencesContract:
    """Behaviour every adapter shares."""

    async def test_preferences_round_trip(self, stores: Stores) -> None:
        assert await stores.preferences.get_preferences("amy") is None
        prefs = Preferences(
            locale="de",
            timezone="Europe/Berlin",
            scope="selected",
            mowers=[OTHER_MOWER, MOWER],
            kinds={"job_started": True, "battery_low": False},
            quiet_hours=QuietHours(start="22:00", end="07:00", allow_critical=False),
        )
        await stores.preferences.put_preferences("amy", ACCOUNT, prefs)
        assert await stores.preferences.get_preferences("amy") == prefs
        plain = Preferences(scope="all")
        await stores.preferences.put_preferences("amy", ACCOUNT, plain)
        assert await stores.preferences.get_preferences("amy") == plain

    async def test_subscribers_are_the_accounts_users_with_a_scope(self, stores: Stores) -> None:
        await stores.preferences.put_preferences("cy", ACCOUNT, Preferences(scope="all"))
        await stores.preferences.put_preferences(
            "amy", ACCOUNT, Preferences(scope="selected", mowers=[MOWER])
        )
        await stores.preferences.put_preferences("bob", ACCOUNT, Preferences(scope="none"))
        await stores.preferences.put_preferences("dan", OTHER_ACCOUNT, Preferences(scope="all"))
        subscribers = await stores.preferences.subscribers(ACCOUNT)
        assert [(s.user_id, s.account_id) for s in subscribers] == [
            ("amy", ACCOUNT),
            ("cy", ACCOUNT),
        ]
        assert subscribers[0].preferences.mowers == [MOWER]
        third = uuid.uuid4()
        found = await stores.preferences.subscribers_of([OTHER_ACCOUNT, ACCOUNT, third])
        assert {a: [s.user_id for s in subs] for a, subs in found.items()} == {
            ACCOUNT: ["amy", "cy"],
            OTHER_ACCOUNT: ["dan"],
            third: [],
        }
        assert found[ACCOUNT] == subscribers
