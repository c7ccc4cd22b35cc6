"""One contract for every ``SiteRepository``; adapters' test modules import it.

A test module provides ``repo`` (a ``MowerRepository``, for the events and the mowers'
site) and ``sites`` (the ``SiteRepository`` over it) fixtures and star-imports the tests.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from contracts.v1 import (
    Area,
    Connection,
    EventEnvelope,
    GrantsChanged,
    MowerRegistration,
    SiteAreas,
    decode_event,
)
from mowdeck.fleet.errors import SiteNotFoundError, VersionConflictError
from mowdeck.fleet.ports import MowerRecord
from mowdeck.fleet.rules import registry_event
from mowdeck.fleet.sites.model import AreasRecord, Location, SiteRecord
from mowdeck.fleet.sites.usecases import site_event

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(minutes=5)
SQUARE = [[[13.4, 52.5], [13.41, 52.5], [13.41, 52.51], [13.4, 52.51], [13.4, 52.5]]]


def _site(account: uuid.UUID, name: str = "Park") -> SiteRecord:
    return SiteRecord(
        uuid.uuid4(), account, name, "Europe/Berlin", Location(lat=52.5, lon=13.4), NOW, NOW
    )


async def _add(sites: Any, record: SiteRecord) -> SiteRecord:
    await sites.add(record, site_event("site.created", record.ref(), record.account_id, NOW))
    return record


def _areas_event(record: AreasRecord) -> Any:
    return site_event("site.areas_changed", record.payload(), record.account_id, NOW)


async def _pending(repo: Any) -> list[EventEnvelope[Any]]:
    async with repo.claim_unpublished(1000) as claim:
        events = list(claim.events)
        claim.published.extend(e.event_id for e in events)
    return [decode_event(e.body) for e in events]


async def test_contract_add_get_and_pages_by_name(repo: Any, sites: Any) -> None:
    await _pending(repo)
    account = uuid.uuid4()
    b, a, c = [await _add(sites, _site(account, n)) for n in ("B", "A", "C")]
    await _add(sites, _site(uuid.uuid4(), "A"))  # another account's
    assert await sites.get(a.site_id) == a
    assert await sites.get(uuid.uuid4()) is None
    first = await sites.page_of_account(account, None, None, 2)
    assert [s.name for s in first] == ["A", "B"]
    rest = await sites.page_of_account(account, None, ("B", b.site_id), 2)
    assert [s.name for s in rest] == ["C"]
    only = await sites.page_of_account(account, [c.site_id, uuid.uuid4()], None, 10)
    assert only == [c]
    assert [e.type for e in await _pending(repo)] == ["site.created"] * 4


async def test_contract_update_checks_the_version(repo: Any, sites: Any) -> None:
    site = await _add(sites, _site(uuid.uuid4()))
    moved = SiteRecord(
        site.site_id, site.account_id, "New", "Europe/Paris", site.location, NOW, LATER, 2
    )
    event = site_event("site.updated", moved.ref(), site.account_id, LATER)
    await sites.update(moved, event, 1)
    assert await sites.get(site.site_id) == moved
    with pytest.raises(VersionConflictError):
        await sites.update(moved, event, 1)


async def test_contract_areas_are_versioned_and_announced(repo: Any, sites: Any) -> None:
    site = await _add(sites, _site(uuid.uuid4()))
    await _pending(repo)
    empty = await sites.get_areas(site.site_id)
    assert (empty.version, empty.areas) == (0, [])
    areas = [Area(name="Lawn", kind="work_area", rings=SQUARE)]
    first = await sites.put_areas(site.site_id, areas, now=NOW, event=_areas_event)
    second = await sites.put_areas(site.site_id, [], now=LATER, event=_areas_event)
    assert (first.version, second.version) == (1, 2)
    assert (await sites.get_areas(site.site_id)).version == 2
    events = await _pending(repo)
    assert [e.type for e in events] == ["site.areas_changed"] * 2
    payload = events[0].payload
    assert isinstance(payload, SiteAreas)
    assert (payload.version, payload.areas) == (1, areas)
    assert await sites.get_areas(uuid.uuid4()) is None
    with pytest.raises(SiteNotFoundError):
        await sites.put_areas(uuid.uuid4(), areas, now=NOW, event=_areas_event)


async def test_contract_areas_page_by_site_id(repo: Any, sites: Any) -> None:
    added = [await _add(sites, _site(uuid.uuid4())) for _ in range(3)]
    areas = [Area(name="Lawn", kind="stay_out", rings=SQUARE)]
    await sites.put_areas(added[0].site_id, areas, now=NOW, event=_areas_event)
    ids = sorted(s.site_id for s in added)
    seen: list[SiteAreas] = []
    after = min(ids).int - 1
    page = await sites.areas_page(uuid.UUID(int=after), 1000)
    seen = [p for p in page if p.site_id in ids]
    assert [p.site_id for p in seen] == ids
    assert {p.site_id: p.areas for p in seen}[added[0].site_id] == areas
    assert await sites.areas_page(max(ids), 1000) == [
        p for p in await sites.areas_page(max(ids), 1000) if p.site_id > max(ids)
    ]
    two = await sites.areas_page(uuid.UUID(int=after), 2)
    assert len(two) == 2


async def test_contract_remove_leaves_mowers_without_a_site(repo: Any, sites: Any) -> None:
    site = await _add(sites, _site(uuid.uuid4()))
    reg = MowerRegistration(
        mower_id=uuid.uuid4(),
        account_id=site.account_id,
        name="M",
        connection=Connection(kind="simulator", options={}),
        site_id=site.site_id,
    )
    await repo.add(MowerRecord(reg, NOW, NOW), registry_event("mower.registered", reg, now=NOW))
    await _pending(repo)
    assert await sites.mowers_at(site.site_id) == [reg.mower_id]
    assert await sites.mowers_at(uuid.uuid4()) == []
    removed = site_event("site.removed", site.ref(), site.account_id, LATER)
    with pytest.raises(VersionConflictError):
        await sites.remove(site.site_id, removed, 7, now=LATER, mower_event=_updated)
    left = await sites.remove(site.site_id, removed, 1, now=LATER, mower_event=_updated)
    assert [m.mower_id for m in left] == [reg.mower_id]
    stored = await repo.get(reg.mower_id)
    assert (stored.registration.site_id, stored.version) == (None, 2)
    assert await sites.get(site.site_id) is None
    assert await sites.mowers_at(site.site_id) == []
    assert [e.type for e in await _pending(repo)] == ["site.removed", "mower.updated"]
    with pytest.raises(SiteNotFoundError):
        await sites.remove(site.site_id, removed, 1, now=LATER, mower_event=_updated)


def _updated(registration: MowerRegistration) -> Any:
    return registry_event("mower.updated", registration, now=LATER)


async def test_contract_announce_stores_an_event(repo: Any, sites: Any) -> None:
    await _pending(repo)
    await sites.announce(
        site_event("identity.grants.changed", GrantsChanged(object="site:x"), None, NOW)
    )
    assert [e.type for e in await _pending(repo)] == ["identity.grants.changed"]
