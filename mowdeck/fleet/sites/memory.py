"""In-memory ``SiteRepository`` over the in-memory mower registry (its events and mowers)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime

import msgspec

from contracts.v1 import Area, MowerRegistration, SiteAreas
from mowdeck.fleet.errors import SiteNotFoundError, VersionConflictError
from mowdeck.fleet.memory import InMemoryMowerRepository
from mowdeck.fleet.ports import RegistryEvent
from mowdeck.fleet.sites.model import AreasRecord, SiteRecord

__all__ = ["InMemorySiteRepository"]


class InMemorySiteRepository:
    """Sites in dicts; events go to ``registry.events`` like the registry's own."""

    def __init__(self, registry: InMemoryMowerRepository) -> None:
        self.registry = registry
        self.sites: dict[uuid.UUID, SiteRecord] = {}
        self.areas: dict[uuid.UUID, AreasRecord] = {}

    def _emit(self, event: RegistryEvent) -> None:
        self.registry.events.append((event, None))

    async def add(self, record: SiteRecord, event: RegistryEvent) -> None:
        """Store a new site and its event."""
        if record.site_id in self.sites:
            raise VersionConflictError(f"site {record.site_id} exists")
        self.sites[record.site_id] = record
        self._emit(event)

    async def get(self, site_id: uuid.UUID) -> SiteRecord | None:
        """One site, or None."""
        return self.sites.get(site_id)

    async def page_of_account(
        self,
        account_id: uuid.UUID,
        site_ids: Sequence[uuid.UUID] | None,
        after: tuple[str, uuid.UUID] | None,
        limit: int,
    ) -> list[SiteRecord]:
        """Up to ``limit`` of the account's sites behind ``after``."""
        wanted = None if site_ids is None else set(site_ids)
        found = sorted(
            (
                s
                for s in self.sites.values()
                if s.account_id == account_id
                and (wanted is None or s.site_id in wanted)
                and (after is None or (s.name, s.site_id) > after)
            ),
            key=lambda s: (s.name, s.site_id),
        )
        return found[:limit]

    def _current(self, site_id: uuid.UUID, expected_version: int) -> SiteRecord:
        current = self.sites.get(site_id)
        if current is None:
            raise SiteNotFoundError(f"site {site_id} does not exist")
        if current.version != expected_version:
            raise VersionConflictError(f"site {site_id} changed meanwhile")
        return current

    async def update(self, record: SiteRecord, event: RegistryEvent, expected_version: int) -> None:
        """Replace a site and store its event."""
        self._current(record.site_id, expected_version)
        self.sites[record.site_id] = record
        self._emit(event)

    async def remove(
        self,
        site_id: uuid.UUID,
        event: RegistryEvent,
        expected_version: int,
        *,
        now: datetime,
        mower_event: Callable[[MowerRegistration], RegistryEvent],
    ) -> list[MowerRegistration]:
        """Delete a site, its areas, and its mowers' site."""
        self._current(site_id, expected_version)
        del self.sites[site_id]
        self.areas.pop(site_id, None)
        self._emit(event)
        left: list[MowerRegistration] = []
        for mower_id, record in sorted(self.registry.mowers.items()):
            if record.registration.site_id != site_id:
                continue
            registration = msgspec.structs.replace(record.registration, site_id=None)
            self.registry.mowers[mower_id] = replace(
                record, registration=registration, updated_at=now, version=record.version + 1
            )
            self._emit(mower_event(registration))
            left.append(registration)
        return left

    async def mowers_at(self, site_id: uuid.UUID) -> list[uuid.UUID]:
        """The ids of the mowers at a site."""
        return sorted(
            m for m, r in self.registry.mowers.items() if r.registration.site_id == site_id
        )

    async def put_areas(
        self,
        site_id: uuid.UUID,
        areas: list[Area],
        *,
        now: datetime,
        event: Callable[[AreasRecord], RegistryEvent],
    ) -> AreasRecord:
        """Replace a site's areas, one version up."""
        site = self.sites.get(site_id)
        if site is None:
            raise SiteNotFoundError(f"site {site_id} does not exist")
        before = self.areas.get(site_id)
        record = AreasRecord(
            site_id, site.account_id, (before.version if before else 0) + 1, areas, now
        )
        self.areas[site_id] = record
        self._emit(event(record))
        return record

    async def get_areas(self, site_id: uuid.UUID) -> AreasRecord | None:
        """A site's areas, or None without the site."""
        site = self.sites.get(site_id)
        if site is None:
            return None
        return self.areas.get(site_id) or AreasRecord(site_id, site.account_id, 0, [], None)

    async def areas_page(self, after: uuid.UUID | None, limit: int) -> list[SiteAreas]:
        """Every site's areas by site id behind ``after``."""
        ids = sorted(s for s in self.sites if after is None or s > after)[:limit]
        found = [await self.get_areas(s) for s in ids]
        return [r.payload() for r in found if r is not None]

    async def announce(self, event: RegistryEvent) -> None:
        """Store an event of its own."""
        self._emit(event)
