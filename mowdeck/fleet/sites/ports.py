"""The port of the site store: sites, their areas, and the events announcing them."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol

from contracts.v1 import Area, MowerRegistration, SiteAreas
from mowdeck.fleet.ports import RegistryEvent
from mowdeck.fleet.sites.model import AreasRecord, SiteRecord

__all__ = ["SiteRepository"]


class SiteRepository(Protocol):
    """Sites and their areas; every change is stored with the event that announces it,
    in the registry's event table (the relay publishes them in commit order)."""

    async def add(self, record: SiteRecord, event: RegistryEvent) -> None:
        """Store a new site and its ``site.created``."""
        ...

    async def get(self, site_id: uuid.UUID) -> SiteRecord | None:
        """One site, or None."""
        ...

    async def page_of_account(
        self,
        account_id: uuid.UUID,
        site_ids: Sequence[uuid.UUID] | None,
        after: tuple[str, uuid.UUID] | None,
        limit: int,
    ) -> list[SiteRecord]:
        """Up to ``limit`` of the account's sites (among ``site_ids``; all when None), by
        name then id, behind the keyset position ``after``."""
        ...

    async def update(self, record: SiteRecord, event: RegistryEvent, expected_version: int) -> None:
        """Replace a site if still at ``expected_version``: ``VersionConflictError`` if it
        moved on, ``SiteNotFoundError`` if it is gone."""
        ...

    async def remove(
        self,
        site_id: uuid.UUID,
        event: RegistryEvent,
        expected_version: int,
        *,
        now: datetime,
        mower_event: Callable[[MowerRegistration], RegistryEvent],
    ) -> list[MowerRegistration]:
        """Delete a site and its areas, leave its mowers without a site (each with its
        ``mower_event``, a ``mower.updated``); returns those mowers as they are now."""
        ...

    async def mowers_at(self, site_id: uuid.UUID) -> list[uuid.UUID]:
        """The ids of the mowers at a site, in id order."""
        ...

    async def put_areas(
        self,
        site_id: uuid.UUID,
        areas: list[Area],
        *,
        now: datetime,
        event: Callable[[AreasRecord], RegistryEvent],
    ) -> AreasRecord:
        """Replace every area of a site, one version up, with ``event`` of the result;
        ``SiteNotFoundError`` if the site is gone."""
        ...

    async def get_areas(self, site_id: uuid.UUID) -> AreasRecord | None:
        """A site's areas (version 0 before any were put), or None without the site."""
        ...

    async def areas_page(self, after: uuid.UUID | None, limit: int) -> list[SiteAreas]:
        """Every site's areas, by site id behind ``after`` (``fleet.sites.areas``)."""
        ...

    async def announce(self, event: RegistryEvent) -> None:
        """Store an event owed to the bus that goes with no row of its own (a grant)."""
        ...
