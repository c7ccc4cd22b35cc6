"""Sites as Fleet stores and shows them: request bodies, records, views, GeoJSON out."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from contracts.v1 import Area, SiteAreas, SiteRef

__all__ = [
    "SITE_ROLES",
    "AreasRecord",
    "Location",
    "MemberGrant",
    "MemberView",
    "MembersView",
    "SiteCreate",
    "SitePage",
    "SitePatch",
    "SiteRecord",
    "SiteView",
    "feature_collection",
    "site_view",
]

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=100)]
TimeZone = Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
SiteRole = Literal["viewer", "operator"]
SITE_ROLES: tuple[str, ...] = ("viewer", "operator")


class Location(msgspec.Struct, frozen=True, kw_only=True):
    """Where a site is (WGS84 degrees)."""

    lat: Annotated[float, msgspec.Meta(ge=-90, le=90)]
    lon: Annotated[float, msgspec.Meta(ge=-180, le=180)]


class SiteCreate(msgspec.Struct, frozen=True, kw_only=True):
    """Body of ``POST /v1/sites``; ``timezone`` is an IANA name such as ``Europe/Berlin``."""

    name: Name
    timezone: TimeZone
    location: Location


class SitePatch(msgspec.Struct, frozen=True, kw_only=True):
    """Body of ``PATCH /v1/sites/{id}``: the fields to change."""

    name: Name | None = None
    timezone: TimeZone | None = None
    location: Location | None = None


class MemberGrant(msgspec.Struct, frozen=True, kw_only=True):
    """Body of ``PUT /v1/sites/{id}/members/{user_id}``: the user's role on the site."""

    role: SiteRole


class MemberView(msgspec.Struct, frozen=True, kw_only=True):
    """A user with a role on a site."""

    user_id: str
    role: SiteRole


class MembersView(msgspec.Struct, frozen=True, kw_only=True):
    """The users with a role on a site, by user id."""

    members: list[MemberView]


@dataclass(frozen=True)
class SiteRecord:
    """A stored site with its bookkeeping (``version`` for optimistic concurrency)."""

    site_id: uuid.UUID
    account_id: uuid.UUID
    name: str
    timezone: str
    location: Location
    created_at: datetime
    updated_at: datetime
    version: int = 1

    def ref(self) -> SiteRef:
        """The payload of ``site.created/updated/removed``."""
        return SiteRef(
            site_id=self.site_id, account_id=self.account_id, name=self.name, timezone=self.timezone
        )


@dataclass(frozen=True)
class AreasRecord:
    """A site's areas at ``version`` (0 and none before the first ``PUT``)."""

    site_id: uuid.UUID
    account_id: uuid.UUID
    version: int
    areas: list[Area]
    updated_at: datetime | None

    def payload(self) -> SiteAreas:
        """The payload of ``site.areas_changed``."""
        return SiteAreas(
            site_id=self.site_id, account_id=self.account_id, version=self.version, areas=self.areas
        )


class SiteView(msgspec.Struct, frozen=True, kw_only=True):
    """A site as the API shows it."""

    site_id: uuid.UUID
    account_id: uuid.UUID
    name: str
    timezone: str
    location: Location
    created_at: datetime
    updated_at: datetime


def site_view(record: SiteRecord) -> SiteView:
    """The view of a stored site."""
    return SiteView(
        site_id=record.site_id,
        account_id=record.account_id,
        name=record.name,
        timezone=record.timezone,
        location=record.location,
        created_at=record.created_at,
        updated_at=record.updated_at,
    )


class SitePage(msgspec.Struct, frozen=True, kw_only=True):
    """A page of sites by name then id; ``next_after`` continues it while ``has_more``."""

    sites: list[SiteView]
    next_after: str | None
    has_more: bool


def feature_collection(record: AreasRecord) -> dict[str, Any]:
    """A site's areas as the GeoJSON FeatureCollection they were put as, with ``version``."""
    return {
        "type": "FeatureCollection",
        "site_id": str(record.site_id),
        "version": record.version,
        "features": [
            {
                "type": "Feature",
                "properties": {"name": area.name, "kind": area.kind},
                "geometry": {
                    "type": "Polygon",
                    "coordinates": [[list(p) for p in ring] for ring in area.rings],
                },
            }
            for area in record.areas
        ],
    }
