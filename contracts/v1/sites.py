"""Sites and their areas, as Fleet publishes them to the gateway and Notifications.

A site is a customer's property, a park or a pitch: a time zone, a location and the
areas its mowers work in (``work_area``) or must keep out of (``stay_out``). Coordinates
follow GeoJSON (RFC 7946): ``[longitude, latitude]`` in WGS84, each ring closed (its last
position equals its first), the first ring the outer boundary and any further rings holes.
Fleet validates the geometry before it publishes it; consumers may trust its shape.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

import msgspec

from contracts.v1._base import Struct

__all__ = [
    "AREA_KINDS",
    "Area",
    "AreaKind",
    "SiteAreas",
    "SiteAreasReply",
    "SiteAreasRequest",
    "SiteRef",
]

AreaKind = Literal["work_area", "stay_out"]
AREA_KINDS: tuple[str, ...] = ("work_area", "stay_out")

AreaName = Annotated[str, msgspec.Meta(min_length=1, max_length=100)]
# ``[longitude, latitude]`` (an altitude after them is allowed and ignored). A list, not a
# tuple: the same JSON, and a schema every OpenAPI tool reads (no ``items: false``).
Position = Annotated[list[float], msgspec.Meta(min_length=2, max_length=3)]
Ring = list[Position]


class Area(Struct, frozen=True):
    """One polygon of a site: where its mowers work, or where they must not go."""

    name: AreaName
    kind: AreaKind
    rings: list[Ring]


class SiteAreas(Struct, frozen=True):
    """Payload of ``site.areas_changed``: every area of a site at ``version``.

    ``version`` grows by one with every change; a consumer keeps the highest it saw and
    ignores an older one. A site without areas has an empty list.
    """

    site_id: uuid.UUID
    account_id: uuid.UUID
    version: Annotated[int, msgspec.Meta(ge=0)]
    areas: list[Area] = msgspec.field(default_factory=list)


class SiteRef(Struct, frozen=True):
    """Payload of ``site.created``, ``site.updated`` and ``site.removed``."""

    site_id: uuid.UUID
    account_id: uuid.UUID
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=100)]
    timezone: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]


class SiteAreasRequest(Struct, frozen=True):
    """Ask Fleet (core request ``fleet.sites.areas``) for every site's areas, by pages.

    Sites come ordered by id; ``after`` continues behind the last id of the previous
    page, and a reply whose ``next_after`` is set has more.
    """

    after: uuid.UUID | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=1000)] | None = None


class SiteAreasReply(Struct, frozen=True):
    """Fleet's answer to a ``SiteAreasRequest``."""

    sites: list[SiteAreas] = msgspec.field(default_factory=list)
    next_after: uuid.UUID | None = None
