"""Access by site: a site's viewer streams exactly that site's mowers, and a mower that
joins the site reaches the stream when Fleet says the grants changed."""

from __future__ import annotations

import uuid

from contracts.v1 import EventEnvelope, GrantsChanged
from mowdeck.authz import LocalAuthorizer, Tuple, account_object, grant_tuples, mower_object
from mowdeck.authz import site_object as site
from mowdeck.kit.bus import Bus
from tests.integration.realtime.conftest import (
    ACCOUNT,
    FOREIGN,
    MOWER,
    OTHER,
    SECOND,
    Opener,
    ServiceFactory,
    now,
    publish_state,
    state,
)

SITE = uuid.UUID("5a000000-0000-4000-8000-00000000005a")


async def test_a_site_viewer_streams_exactly_the_sites_mowers(
    bus: Bus, authorizer: LocalAuthorizer, make_service: ServiceFactory, open_stream: Opener
) -> None:
    await authorizer.write(
        [
            Tuple(account_object(ACCOUNT), "account", site(SITE)),
            Tuple(site(SITE), "site", mower_object(MOWER)),
            # Another account's mower placed at the site: never shown to its viewers.
            Tuple(site(SITE), "site", mower_object(FOREIGN)),
            *grant_tuples(ACCOUNT, "sam", "viewer", site_id=SITE),
        ]
    )
    service = await make_service(realtime_authz_refresh_seconds=60)
    sam = await open_stream(service, "sam", ACCOUNT)
    snapshot = await sam.next()
    assert snapshot.data["mowers"] == [str(MOWER)]
    # SECOND (same account, not at the site) and FOREIGN first, MOWER as the sentinel.
    await publish_state(bus, state(SECOND, ACCOUNT, battery=11))
    await publish_state(bus, state(FOREIGN, OTHER, battery=12))
    await publish_state(bus, state(MOWER, ACCOUNT, battery=13))
    shown = await sam.next()
    assert (shown.type, shown.data["mower_id"], shown.data["battery"]) == (
        "state",
        str(MOWER),
        13,
    )
    # SECOND joins the site: Fleet writes the tuple, then says the account's grants changed.
    await authorizer.write([Tuple(site(SITE), "site", mower_object(SECOND))])
    changed = GrantsChanged(account_id=ACCOUNT, object=mower_object(SECOND))
    await bus.publish_event(
        EventEnvelope.new(
            "identity.grants.changed", changed, producer="fleet", now=now(), account_id=ACCOUNT
        )
    )
    access = await sam.next()
    assert (access.type, access.data["added"]) == ("access", [str(SECOND)])
    # Its latest state comes with it, then what it reports from now on.
    joined = await sam.next()
    assert (joined.data["mower_id"], joined.data["battery"]) == (str(SECOND), 11)
    await publish_state(bus, state(SECOND, ACCOUNT, battery=14))
    shown = await sam.next()
    assert (shown.data["mower_id"], shown.data["battery"]) == (str(SECOND), 14)
