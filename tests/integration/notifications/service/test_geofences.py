"""Geofences through the running service: the sites' areas from a stand-in Fleet (a real
responder on ``fleet.sites.areas`` and real site events), states from NATS, inbox items
per subscriber, alarms raised and cleared, ``theft_suspected``."""

from __future__ import annotations

import math
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from contracts.v1 import (
    AlarmChanged,
    Area,
    MowerListRequest,
    MowerRegistration,
    SiteAreas,
    SiteAreasReply,
    SiteAreasRequest,
    decode,
    decode_event,
    encode,
)
from contracts.v1.fleet import Connection
from contracts.v1.subjects import FLEET_MOWERS_LIST, FLEET_SITES_AREAS
from mowdeck.kit.bus import Bus
from mowdeck.notifications.infra import Stores
from mowdeck.notifications.rules.templates import render
from mowdeck.notifications.service import NotificationsService
from tests.support.eventually import eventually
from tests.unit.notifications.samples import ACCOUNT, MOWER, OTHER_MOWER, Clock, at, state

from .conftest import Member, ServiceFactory, inbox, publish_event, publish_states

SITE = uuid.UUID("00000000-0000-4000-8000-000000000051")
OTHER_SITE = uuid.UUID("00000000-0000-4000-8000-000000000052")
LAT, LON = 52.5, 13.4
M_LAT = 1.0 / 111_195
M_LON = M_LAT / math.cos(math.radians(LAT))


def ring(x0: float, y0: float, x1: float, y1: float) -> list[tuple[float, float]]:
    """A closed rectangle of local metres as GeoJSON positions [lon, lat]."""
    corners = [(x0, y0), (x1, y0), (x1, y1), (x0, y1), (x0, y0)]
    return [(LON + x * M_LON, LAT + y * M_LAT) for x, y in corners]


def lawn(version: int, x0: float = 0.0) -> SiteAreas:
    """The site's 40 x 30 m lawn from ``x0`` east, with a pond in the middle."""
    return SiteAreas(
        site_id=SITE,
        account_id=ACCOUNT,
        version=version,
        areas=[
            Area(name="lawn", kind="work_area", rings=[ring(x0, 0, x0 + 40, 30)]),
            Area(name="pond", kind="stay_out", rings=[ring(x0 + 15, 10, x0 + 25, 20)]),
        ],
    )


SITES = [
    lawn(1),
    SiteAreas(site_id=OTHER_SITE, account_id=ACCOUNT, version=7,
              areas=[Area(name="far", kind="work_area", rings=[ring(1000, 0, 1010, 10)])]),
]  # fmt: skip


def where(seconds: float, x: float, y: float, mower: uuid.UUID = MOWER, **fields: Any) -> Any:
    """A state of ``mower`` at local (x, y) metres; mowing unless told otherwise."""
    fields.setdefault("activity", "mowing")
    return state(seconds, mower_id=mower, lat=LAT + y * M_LAT, lon=LON + x * M_LON, **fields)


@pytest.fixture
async def fleet(bus: Bus) -> AsyncIterator[list[int]]:
    """Fleet stand-in: ``MOWER`` in ``SITE``, ``OTHER_MOWER`` in no site; the sites' areas
    one page of one site at a time (the pages asked are counted)."""
    registrations = [
        MowerRegistration(mower_id=MOWER, account_id=ACCOUNT, name="Rasenmeister",
                          connection=Connection(kind="simulator"), site_id=SITE),
        MowerRegistration(mower_id=OTHER_MOWER, account_id=ACCOUNT, name="Lawnbot",
                          connection=Connection(kind="simulator")),
    ]  # fmt: skip
    pages: list[int] = []

    async def mowers(msg: Any) -> None:
        request = decode(msg.data, MowerListRequest)
        await msg.respond(encode(request.answer(registrations)))

    async def areas(msg: Any) -> None:
        request = decode(msg.data, SiteAreasRequest)
        ordered = sorted(SITES, key=lambda s: s.site_id.int)
        rest = [s for s in ordered if request.after is None or s.site_id.int > request.after.int]
        page = rest[:1]
        after = page[-1].site_id if len(rest) > 1 else None
        pages.append(len(page))
        await msg.respond(encode(SiteAreasReply(sites=page, next_after=after)))

    subs = [
        await bus.nc.subscribe(FLEET_MOWERS_LIST, cb=mowers),
        await bus.nc.subscribe(FLEET_SITES_AREAS, cb=areas),
    ]
    yield pages
    for sub in subs:
        await sub.unsubscribe()


@pytest.fixture
async def alarm_changes(bus: Bus) -> AsyncIterator[list[AlarmChanged]]:
    """Every ``notifications.alarm_changed`` published while the test runs."""
    changes: list[AlarmChanged] = []

    async def on_change(msg: Any) -> None:
        changes.append(decode_event(msg.data).payload)

    sub = await bus.nc.subscribe("event.notifications.alarm_changed", cb=on_change)
    yield changes
    await sub.unsubscribe()


async def _fenced(service: NotificationsService, site: uuid.UUID, version: int) -> None:
    fences = service.parts.ingest.fences
    await eventually(lambda: fences.version(site) == version, what=f"site areas v{version}")


async def _kinds(stores: Stores, user: str) -> list[str]:
    return [item.kind for item in await inbox(stores, user)]


async def test_a_mower_leaving_its_area_is_told_once_alarmed_and_cleared_back_inside(  # noqa: PLR0917 - pytest fixtures
    make_service: ServiceFactory,
    member: Member,
    bus: Bus,
    stores: Stores,
    clock: Clock,
    fleet: list[int],
    alarm_changes: list[AlarmChanged],
) -> None:
    await member("anna")
    await member("ben")
    await member("carla", kinds={"left_area": False})
    service = await make_service()
    await _fenced(service, SITE, 1)
    await _fenced(service, OTHER_SITE, 7)
    assert fleet == [1, 1]  # two pages of one site each
    clock.now = at(120)
    await publish_states(
        bus,
        [
            where(0, 20, 5),  # inside
            where(10, 50, 5),  # 10 m east of the lawn
            where(30, 52, 5),
            where(45, 54, 5),  # outside for 35 s, 14 m: told
            where(60, 56, 5),  # still outside: nothing more
            where(61, 500, 500, OTHER_MOWER),  # no site: never fenced
        ],
    )
    # The sentinel: a battery_low of the other mower after them, then count.
    await publish_states(bus, [where(70, 0, 0, OTHER_MOWER, battery=50),
                               where(71, 0, 0, OTHER_MOWER, battery=10)])  # fmt: skip
    for user in ("anna", "ben", "carla"):
        await eventually(_has(stores, user, "battery_low"), what=f"{user}'s inbox")
    assert await _kinds(stores, "anna") == ["battery_low", "left_area"]
    assert await _kinds(stores, "ben") == ["battery_low", "left_area"]
    assert await _kinds(stores, "carla") == ["battery_low"]  # turned left_area off
    [told] = [i for i in await inbox(stores, "anna") if i.kind == "left_area"]
    assert (told.severity, told.params["distance_m"], told.params["outside_seconds"]) == (
        "critical",
        14,
        35,
    )
    title, body = render(told.message_key, {**told.params, "mower": "R"}, "en", "UTC")
    assert (title, body) == ("R left its area", "14 m outside its work areas for 35 s.")
    raised = [c for c in alarm_changes if c.kind == "left_area"]
    assert [(c.change, c.mower_id) for c in raised] == [("raised", MOWER)]

    # Back inside: the alarm clears.
    await publish_states(bus, [where(80, 30, 25)])
    await eventually(
        lambda: [c.change for c in alarm_changes if c.kind == "left_area"] == ["raised", "cleared"],
        what="the alarm cleared",
    )


async def test_a_stay_out_zone_and_new_areas_by_event_and_a_site_by_mower_event(  # noqa: PLR0917 - pytest fixtures
    make_service: ServiceFactory,
    member: Member,
    bus: Bus,
    stores: Stores,
    clock: Clock,
    fleet: list[int],
) -> None:
    await member("anna")
    # The pond is 10 m across: 2 m deep in it is far enough here.
    service = await make_service(notifications_geofence_metres=2.0)
    await _fenced(service, SITE, 1)
    clock.now = at(300)
    # The lawn moves 100 m east (v2); an older version arriving late changes nothing.
    await publish_event(bus, "site.areas_changed", lawn(2, x0=100), at(1))
    await publish_event(bus, "site.areas_changed", lawn(1), at(2))
    # The other mower joins the site.
    joined = MowerRegistration(mower_id=OTHER_MOWER, account_id=ACCOUNT, name="Lawnbot",
                               connection=Connection(kind="simulator"), site_id=SITE)  # fmt: skip
    await publish_event(bus, "mower.updated", joined, at(3))
    await _fenced(service, SITE, 2)
    fences = service.parts.ingest.fences
    probe = where(0, 20, 5, OTHER_MOWER)

    def other_fenced() -> bool:
        placement = fences.placement(probe)
        return placement is not None and placement.outside_m > 0

    await eventually(other_fenced, what="the other mower fenced")
    await publish_states(
        bus,
        [
            where(0, 130, 5),  # inside v2's lawn (a first state outside is old news)
            where(10, 20, 5),  # in v1's lawn, 80 m west of v2's
            where(45, 20, 5),
            where(0, 105, 5, OTHER_MOWER),
            where(10, 120, 15, OTHER_MOWER),  # in v2's pond, 5 m from its edge
            where(45, 120, 15, OTHER_MOWER),
        ],
    )
    await eventually(lambda: _count(stores, "anna", 2), what="two left_area")
    items = await inbox(stores, "anna")
    assert sorted((i.mower_id, i.message_key) for i in items) == sorted(
        [(MOWER, "left_area.outside"), (OTHER_MOWER, "left_area.stay_out")]
    )
    [pond] = [i for i in items if i.mower_id == OTHER_MOWER]
    assert pond.params["zone"] == "pond"


async def test_a_mower_carried_away_is_suspected_stolen(
    make_service: ServiceFactory, member: Member, bus: Bus, stores: Stores, clock: Clock
) -> None:
    await member("anna")
    service = await make_service()
    await _fenced(service, SITE, 1)
    clock.now = at(60)
    # Lifted from the lawn (error), then 10 m a second north: out of the lawn too.
    await publish_states(
        bus,
        [where(0, 20, 5, activity="idle")]
        + [where(s, 20, 5 + 10 * s, activity="error", error_code="lifted") for s in range(1, 6)],
    )
    await eventually(_has(stores, "anna", "theft_suspected"), what="theft suspected")
    [theft] = [i for i in await inbox(stores, "anna") if i.kind == "theft_suspected"]
    assert theft.severity == "critical"
    title, _ = render(theft.message_key, {**theft.params, "mower": "R"}, "de", "UTC")
    assert title == "R wurde vielleicht gestohlen"


def _has(stores: Stores, user: str, kind: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return kind in await _kinds(stores, user)

    return check


async def _count(stores: Stores, user: str, count: int) -> bool:
    return len(await inbox(stores, user)) >= count
