"""Who gets a notification: subscribers re-checked with can_view, quiet hours, identity events."""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import UTC, datetime

import aiohttp
import asyncpg

from contracts.v1 import GrantsChanged, MowerRegistration, UserRef
from contracts.v1.fleet import Connection
from mowdeck.authn import TokenIssuer
from mowdeck.authz import LocalAuthorizer, revoke_tuples
from mowdeck.kit.bus import Bus
from mowdeck.notifications.inbox.model import InboxItem
from mowdeck.notifications.infra import Stores
from mowdeck.notifications.rules.events import RuleEvent
from mowdeck.notifications.rules.quiet import QuietHours
from tests.support.eventually import eventually
from tests.unit.notifications.samples import ACCOUNT, MOWER, at, state

from .conftest import (
    AUTH,
    Clock,
    Member,
    ServiceFactory,
    counted,
    grant,
    inbox,
    publish_event,
    publish_states,
    subscribe,
)


async def test_revoked_viewer_and_new_grant_under_all_follow_the_grants(  # noqa: PLR0917 - pytest fixtures
    make_service: ServiceFactory,
    member: Member,
    bus: Bus,
    stores: Stores,
    authorizer: LocalAuthorizer,
    clock: Clock,
) -> None:
    await member("kept")
    await member("revoked")
    await subscribe(stores, "granted_later")  # scope all, but no grant yet
    service = await make_service()
    clock.now = at(30)
    await publish_states(bus, [state(0, battery=50), state(10, battery=15)])
    await eventually(lambda: inbox(stores, "revoked"), what="the first event")
    assert await inbox(stores, "granted_later") == []
    assert counted(service, "suppressed", reason="not_viewable") == 1

    await authorizer.write([], revoke_tuples(ACCOUNT, "revoked", "viewer"))
    await grant(authorizer, "granted_later")
    dropped = counted(service, "decisions_dropped")
    await publish_event(bus, "identity.grants.changed", GrantsChanged(account_id=ACCOUNT), at(15))
    await eventually(lambda: counted(service, "decisions_dropped") > dropped, what="cache dropped")
    await publish_states(bus, [state(20, battery=15, activity="error", error_code="E3")])
    await eventually(lambda: inbox(stores, "granted_later"), what="the second event")
    assert [i.kind for i in await inbox(stores, "kept")] == ["mower_stuck", "battery_low"]
    assert [i.kind for i in await inbox(stores, "revoked")] == ["battery_low"]
    assert [i.kind for i in await inbox(stores, "granted_later")] == ["mower_stuck"]


async def test_selected_mower_not_viewable_gets_nothing(
    make_service: ServiceFactory,
    member: Member,
    bus: Bus,
    stores: Stores,
    clock: Clock,
) -> None:
    await member("viewer")
    # Selected the mower while they could see it (the API checked); not viewable now.
    await subscribe(stores, "selector", scope="selected", mowers=[MOWER])
    service = await make_service()
    clock.now = at(30)
    await publish_states(bus, [state(0, battery=50), state(10, battery=15)])
    await eventually(lambda: inbox(stores, "viewer"))
    # The round that gave the viewer the item decided the selector too, in one transaction.
    await eventually(lambda: counted(service, "suppressed", reason="not_viewable") == 1)
    assert await inbox(stores, "selector") == []


async def test_quiet_hours_hold_the_item_and_let_critical_through(
    make_service: ServiceFactory,
    member: Member,
    bus: Bus,
    stores: Stores,
    clock: Clock,
) -> None:
    # T0 is 12:00 UTC, 14:00 in Berlin in May: inside 13:00-15:00 there.
    quiet = QuietHours(start="13:00", end="15:00", allow_critical=True)
    await member("sleeper", timezone="Europe/Berlin", quiet_hours=quiet)
    service = await make_service()
    clock.now = at(30)
    await publish_states(
        bus,
        [
            state(0, battery=50),
            state(10, battery=15),
            state(20, battery=15, activity="error", error_code="E1"),
        ],
    )
    items = await eventually(lambda: _at_least(stores, "sleeper", 2))
    assert items is not None
    held = {i.kind: i.held_by_quiet_hours for i in items}
    assert held == {"battery_low": True, "mower_stuck": False}
    assert counted(service, "suppressed", reason="quiet_hours") == 1


async def _at_least(stores: Stores, user: str, n: int) -> list[InboxItem] | None:
    items = await inbox(stores, user)
    return items if len(items) >= n else None


async def test_a_repeated_event_is_stored_once(
    make_service: ServiceFactory,
    member: Member,
    stores: Stores,
    pool: asyncpg.Pool,
) -> None:
    await member("ute")
    event = RuleEvent(
        kind="battery_low",
        mower_id=MOWER,
        account_id=ACCOUNT,
        severity="warning",
        dedupe_key=f"battery_low:{MOWER}:{at(0).isoformat()}",
        message_key="battery_low",
        params={"battery": 15},
        occurred_at=at(10),
    )
    async with stores.watches.watches() as tx:
        await tx.write([], [event, event])  # decided twice (a redelivery, a second replica)
    await make_service()
    await eventually(lambda: _pending_gone(pool), what="both pending events completed")
    assert [i.dedupe_key for i in await inbox(stores, "ute")] == [event.dedupe_key]


async def _pending_gone(pool: asyncpg.Pool) -> bool:
    count: int = await pool.fetchval("SELECT count(*) FROM notification_pending")
    return count == 0


async def test_user_deletion_purges_preferences_and_inbox(
    make_service: ServiceFactory,
    member: Member,
    bus: Bus,
    stores: Stores,
    clock: Clock,
) -> None:
    await member("leaver")
    await member("stayer")
    await make_service()
    clock.now = at(30)
    await publish_states(bus, [state(0, battery=50), state(10, battery=15)])
    await eventually(lambda: inbox(stores, "leaver"))
    await publish_event(bus, "identity.user.deleted", UserRef(user_id="leaver"), at(20))
    await eventually(lambda: _gone(stores, "leaver"), what="the user's data deleted")
    assert await stores.preferences.get_preferences("leaver") is None
    assert len(await inbox(stores, "stayer")) == 1
    assert await stores.preferences.get_preferences("stayer") is not None


async def _gone(stores: Stores, user: str) -> bool:
    return not await inbox(stores, user) and await stores.preferences.get_preferences(user) is None


async def test_removed_mower_is_forgotten(
    make_service: ServiceFactory,
    member: Member,
    bus: Bus,
    stores: Stores,
    clock: Clock,
) -> None:
    await member("ute")
    service = await make_service()
    clock.now = at(30)
    await publish_states(bus, [state(0, battery=50), state(10, battery=15)])
    await eventually(lambda: inbox(stores, "ute"))
    removed = MowerRegistration(
        mower_id=MOWER, account_id=ACCOUNT, name="x", connection=Connection(kind="simulator")
    )
    await publish_event(bus, "mower.removed", removed, at(20))
    await eventually(lambda: _forgotten(stores), what="the mower forgotten")
    assert await inbox(stores, "ute") == []
    assert service.parts.inbox.names.get(MOWER) is None


async def _forgotten(stores: Stores) -> bool:
    return not await stores.watches.read_watches([MOWER])


async def test_a_disabled_user_is_refused_by_the_api(
    make_service: ServiceFactory, member: Member, bus: Bus
) -> None:
    await member("shut-out")
    await member("still-in")
    service = await make_service()
    tokens = {user: TokenIssuer(AUTH).mint(user, ACCOUNT) for user in ("shut-out", "still-in")}

    async def status(user: str) -> tuple[int, str | None]:
        headers = {"Authorization": f"Bearer {tokens[user]}"}
        async with (
            aiohttp.ClientSession(headers=headers) as http,
            http.get(f"{service.url}/v1/notifications/inbox") as response,
        ):
            body = await response.json()
            return response.status, body.get("reason")

    assert (await status("shut-out"))[0] == 200
    # Now, not the samples' fixed time: the deny-list skips events older than its TTL.
    now = datetime.now(UTC)
    await publish_event(bus, "identity.user.disabled", UserRef(user_id="shut-out"), now)
    await eventually(
        lambda: _refused(status("shut-out")), what="the disabled user's request refused"
    )
    assert (await status("still-in"))[0] == 200


async def _refused(answer: Awaitable[tuple[int, str | None]]) -> bool:
    return await answer == (401, "disabled")
