"""Access by site: a site's viewer whose scope is "all my mowers" is notified about the
site's mowers only, while an account viewer (the control) hears of every mower."""

from __future__ import annotations

import uuid

from mowdeck.authz import LocalAuthorizer, Tuple, account_object, grant_tuples, mower_object
from mowdeck.authz import site_object as site
from mowdeck.kit.bus import Bus
from mowdeck.notifications.infra import Stores
from tests.support.eventually import eventually
from tests.unit.notifications.samples import ACCOUNT, MOWER, OTHER_MOWER, at, state

from .conftest import Clock, Member, ServiceFactory, counted, inbox, publish_states, subscribe

SITE = uuid.UUID("5a000000-0000-4000-8000-00000000005a")


async def test_a_site_viewer_under_all_hears_of_the_sites_mowers_only(  # noqa: PLR0917 - pytest fixtures
    make_service: ServiceFactory,
    member: Member,
    bus: Bus,
    stores: Stores,
    authorizer: LocalAuthorizer,
    clock: Clock,
) -> None:
    await authorizer.write(
        [
            Tuple(account_object(ACCOUNT), "account", site(SITE)),
            Tuple(site(SITE), "site", mower_object(MOWER)),
            *grant_tuples(ACCOUNT, "sam", "viewer", site_id=SITE),
        ]
    )
    await member("control")
    await subscribe(stores, "sam")  # scope all
    service = await make_service()
    clock.now = at(30)
    # OTHER_MOWER (not at the site) runs low first, then MOWER.
    await publish_states(
        bus,
        [
            state(0, mower_id=OTHER_MOWER, battery=50),
            state(10, mower_id=OTHER_MOWER, battery=15),
        ],
    )
    await eventually(lambda: inbox(stores, "control"), what="OTHER_MOWER's event")
    await publish_states(bus, [state(0, battery=50), state(10, battery=15)])

    async def both_of_control() -> bool:
        return len(await inbox(stores, "control")) == 2

    await eventually(both_of_control, what="MOWER's event for the control")
    await eventually(lambda: inbox(stores, "sam"), what="MOWER's event for sam")
    assert sorted(str(i.mower_id) for i in await inbox(stores, "control")) == sorted(
        [str(MOWER), str(OTHER_MOWER)]
    )
    assert [(i.mower_id, i.kind) for i in await inbox(stores, "sam")] == [(MOWER, "battery_low")]
    assert counted(service, "suppressed", reason="not_viewable") == 1
