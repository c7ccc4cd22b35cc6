"""The rules through the running service: states in on NATS, inbox items and events out."""

from __future__ import annotations

import aiohttp

from contracts.v1 import MowerLink
from mowdeck.authn import TokenIssuer
from mowdeck.kit.bus import Bus
from mowdeck.notifications.infra import Stores
from tests.support.eventually import eventually
from tests.unit.notifications.samples import ACCOUNT, MOWER, at, state

from .conftest import (
    AUTH,
    Clock,
    Member,
    SentFeed,
    ServiceFactory,
    counted,
    decided,
    inbox,
    publish_event,
    publish_states,
    scan_rounds_pass,
)

USER = "ute"


async def test_battery_hysteresis_and_cooldown_end_to_end(
    make_service: ServiceFactory,
    member: Member,
    bus: Bus,
    stores: Stores,
    clock: Clock,
) -> None:
    await member(USER)
    service = await make_service()
    clock.now = at(400)
    await publish_states(
        bus,
        [
            state(0, battery=50),
            state(10, battery=15),  # low: told
            state(20, battery=18),  # still low, not re-armed: nothing
            state(30, battery=35),  # re-armed
            state(40, battery=15),  # low again inside the cooldown: held
            state(400, battery=14),  # the cooldown is over and it is still low: told
        ],
    )
    items = await eventually(lambda: _kinds(stores, USER, 2), what="two battery_low items")
    assert items == ["battery_low", "battery_low"]
    await eventually(lambda: counted(service, "states_evaluated") == 6)
    assert counted(service, "suppressed", reason="cooldown") == 1
    assert counted(service, "suppressed", reason="first_state") == 0
    assert counted(service, "events", kind="battery_low") == 2


async def _kinds(stores: Stores, user: str, count: int) -> list[str] | None:
    items = await inbox(stores, user)
    return [i.kind for i in items] if len(items) >= count else None


async def test_first_state_notifies_nothing(
    make_service: ServiceFactory, member: Member, bus: Bus, stores: Stores
) -> None:
    await member(USER)
    service = await make_service()
    await publish_states(bus, [state(0, activity="error", error_code="E7", battery=5)])
    await eventually(lambda: counted(service, "states_evaluated") == 1)
    await eventually(lambda: counted(service, "suppressed", reason="first_state") >= 1)
    # Counted with the batch's commit: the rules decided nothing for it.
    assert decided(service) == 0
    assert await inbox(stores, USER) == []
    assert await stores.watches.read_watches([MOWER])


async def test_mid_job_recharge_is_not_a_finished_job(
    make_service: ServiceFactory,
    member: Member,
    bus: Bus,
    stores: Stores,
    clock: Clock,
) -> None:
    await member(USER, kinds={"job_started": True})
    service = await make_service()
    clock.now = at(4000)
    await publish_states(
        bus,
        [
            state(0, activity="docked", battery=100, charging=True),
            state(10, activity="mowing", battery=90),
            state(1000, activity="returning", battery=15),
            state(1100, activity="charging", battery=16, charging=True),
            state(3000, activity="leaving", battery=95),
            state(3010, activity="mowing", battery=94),
            state(3900, activity="docked", battery=60, charging=True),
        ],
    )
    await eventually(lambda: counted(service, "states_evaluated") == 7)
    await eventually(lambda: _kinds(stores, USER, 3))
    kinds = sorted(i.kind for i in await inbox(stores, USER))
    # One job, started once and finished once: the recharge in the middle is neither.
    assert kinds == ["battery_low", "job_started", "mowing_finished"]
    finished = next(i for i in await inbox(stores, USER) if i.kind == "mowing_finished")
    assert finished.params["duration_seconds"] == 3900 - 10


async def test_de_and_en_rendering_in_notifications_sent(  # noqa: PLR0917 - pytest fixtures
    make_service: ServiceFactory,
    member: Member,
    bus: Bus,
    stores: Stores,
    clock: Clock,
    sent: SentFeed,
) -> None:
    await member("anna", locale="de", timezone="Europe/Berlin")
    await member("bob", locale="en")
    service = await make_service()
    await eventually(lambda: service.parts.inbox.names.get(MOWER))
    clock.now = at(20)
    await publish_states(bus, [state(0, battery=50), state(10, battery=18)])
    await eventually(lambda: len(sent.sent) == 2, what="two notifications.sent")
    by_user = {s.user_id: s for s in sent.sent}
    assert by_user["anna"].kind == "battery_low"
    assert "Rasenmeister" in by_user["anna"].title
    assert "18 %" in by_user["anna"].title + by_user["anna"].body
    assert "18%" in by_user["bob"].title + by_user["bob"].body
    assert by_user["anna"].body != by_user["bob"].body
    items = {i.user_id: i for u in ("anna", "bob") for i in await inbox(stores, u)}
    assert {s.notification_id for s in sent.sent} == {i.id for i in items.values()}


async def test_disconnect_then_reconnect_within_grace_is_silent(
    make_service: ServiceFactory,
    member: Member,
    bus: Bus,
    stores: Stores,
    clock: Clock,
) -> None:
    await member(USER)
    service = await make_service()
    await publish_states(bus, [state(0)])
    await eventually(lambda: counted(service, "states_evaluated") == 1)
    clock.now = at(5)
    await publish_event(bus, "mower.disconnected", MowerLink(mower_id=MOWER), at(5))
    await eventually(lambda: counted(service, "watches_written", source="links") == 1)
    clock.now = at(20)
    await publish_states(bus, [state(20)])  # back within the 30 s grace
    await eventually(lambda: counted(service, "states_evaluated") == 2)
    clock.now = at(60)
    await scan_rounds_pass(service)  # scan rounds past the grace
    assert decided(service) == 0
    assert await inbox(stores, USER) == []


async def test_disconnect_past_grace_is_offline_then_online(
    make_service: ServiceFactory,
    member: Member,
    bus: Bus,
    stores: Stores,
    clock: Clock,
) -> None:
    await member(USER)
    service = await make_service()
    await publish_states(bus, [state(0)])
    await eventually(lambda: counted(service, "states_evaluated") == 1)
    clock.now = at(5)
    await publish_event(bus, "mower.disconnected", MowerLink(mower_id=MOWER), at(5))
    await eventually(lambda: counted(service, "watches_written", source="links") == 1)
    clock.now = at(40)
    await eventually(lambda: _kinds(stores, USER, 1), what="mower_offline")
    clock.now = at(400)
    await publish_states(bus, [state(400)])
    kinds = await eventually(lambda: _kinds(stores, USER, 2), what="mower_online")
    assert kinds == ["mower_online", "mower_offline"]


async def test_heartbeats_of_a_disconnected_mower_do_not_stop_offline(
    make_service: ServiceFactory,
    member: Member,
    bus: Bus,
    stores: Stores,
    clock: Clock,
) -> None:
    await member(USER)
    service = await make_service()
    await publish_states(bus, [state(0)])
    await eventually(lambda: counted(service, "states_evaluated") == 1)
    # The gateway keeps republishing the last state, observed_at and all, every 10 s.
    for seconds in (40, 80, 121):
        clock.now = at(seconds)
        await publish_states(bus, [state(0)])
    await eventually(lambda: counted(service, "states_ignored", reason="not_newer") == 3)
    kinds = await eventually(lambda: _kinds(stores, USER, 1), what="mower_offline")
    assert kinds == ["mower_offline"]


async def test_the_inbox_is_read_through_the_service_http_api(
    make_service: ServiceFactory,
    member: Member,
    bus: Bus,
    stores: Stores,
    clock: Clock,
) -> None:
    await member(USER, locale="de")
    service = await make_service()
    await eventually(lambda: service.parts.inbox.names.get(MOWER))
    clock.now = at(20)
    await publish_states(bus, [state(0, battery=50), state(10, battery=18)])
    await eventually(lambda: inbox(stores, USER))
    token = TokenIssuer(AUTH).mint(USER, ACCOUNT)
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http,
        http.get(f"{service.url}/v1/notifications/inbox") as response,
    ):
        assert response.status == 200
        body = await response.json()
    assert [item["kind"] for item in body["items"]] == ["battery_low"]
    assert body["unread"] == 1
    async with aiohttp.ClientSession() as http, http.get(f"{service.url}/readyz") as ready:
        assert ready.status == 200
