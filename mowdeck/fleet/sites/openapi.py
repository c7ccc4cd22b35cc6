"""The operations of sites (``fleet/sites/routes.py``) for Fleet's OpenAPI document."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Literal

import msgspec

from mowdeck.fleet.sites.model import (
    Location,
    MemberGrant,
    MembersView,
    MemberView,
    SiteCreate,
    SitePage,
    SitePatch,
    SiteView,
)
from mowdeck.fleet.sites.validation import MAX_AREAS
from mowdeck.kit.openapi import Body, Link, Operation, Param
from mowdeck.kit.paging import Cursor

__all__ = ["SITE_OPERATIONS"]

# ``[longitude, latitude]`` (an altitude after them is dropped).
Position = Annotated[list[float], msgspec.Meta(min_length=2, max_length=3)]


class Polygon(msgspec.Struct, frozen=True):
    """A GeoJSON Polygon: closed rings of ``[longitude, latitude]``, the first the outline."""

    type: Literal["Polygon"]
    coordinates: list[Annotated[list[Position], msgspec.Meta(min_length=4)]]


class AreaProperties(msgspec.Struct, frozen=True):
    """What an area is: its unique name and whether mowers work there or stay out."""

    name: Annotated[str, msgspec.Meta(min_length=1, max_length=100)]
    kind: Literal["work_area", "stay_out"]


class Feature(msgspec.Struct, frozen=True):
    """One area."""

    type: Literal["Feature"]
    properties: AreaProperties
    geometry: Polygon


class FeatureCollection(msgspec.Struct, frozen=True):
    """Every area of a site (at most 200, 10,000 positions in all)."""

    type: Literal["FeatureCollection"]
    features: Annotated[list[Feature], msgspec.Meta(max_length=MAX_AREAS)]


class AreasView(msgspec.Struct, frozen=True):
    """A site's areas with their version (0 before the first ``PUT``)."""

    type: Literal["FeatureCollection"]
    site_id: uuid.UUID
    version: int
    features: list[Feature]


_AT = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
_SITE = uuid.UUID("5a1e0000-0d3b-4c55-9a7e-2b8f3c4d5e6f")
_ACCOUNT = uuid.UUID("a0c1e2f3-4455-4677-8899-aabbccddeeff")
_LOCATION = Location(lat=52.52, lon=13.405)
_VIEW = SiteView(
    site_id=_SITE,
    account_id=_ACCOUNT,
    name="Riverside park",
    timezone="Europe/Berlin",
    location=_LOCATION,
    created_at=_AT,
    updated_at=_AT,
)
_RING = [[13.4, 52.52], [13.41, 52.52], [13.41, 52.53], [13.4, 52.53], [13.4, 52.52]]
_FEATURE = Feature("Feature", AreaProperties("Lawn", "work_area"), Polygon("Polygon", [_RING]))
_IN = FeatureCollection("FeatureCollection", [_FEATURE])
_OUT = AreasView("FeatureCollection", _SITE, 3, [_FEATURE])
_ID = Param("site_id", "path", uuid.UUID, "The site's id.")
_USER = Param("user_id", "path", str, "The user's id (a token's `sub`).")
_LINK = {"site_id": "$response.body#/site_id"}
Limit = Annotated[int, msgspec.Meta(ge=1, le=1000)]
_TAGS = ("sites",)

SITE_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "POST", "/v1/sites", "createSite", "Create a site (the account's admins).",
        {201: Body(SiteView, _VIEW, "Created.")},
        body=Body(SiteCreate, SiteCreate(name="Riverside park", timezone="Europe/Berlin",
                                         location=_LOCATION)),
        links=(Link(201, "areas", "putSiteAreas", _LINK), Link(201, "get", "getSite", _LINK)),
        problems=(403, 422, 503), tags=_TAGS,
    ),
    Operation(
        "GET", "/v1/sites", "listSites", "A page of the sites the caller may see, by name then id.",
        {200: Body(SitePage, SitePage(sites=[_VIEW], next_after=None, has_more=False))},
        params=(Param("limit", "query", Limit, "Sites per page (100 when absent)."),
                Param("after", "query", Cursor, "The cursor of the previous page.")),
        problems=(400, 503), tags=_TAGS,
    ),
    Operation(
        "GET", "/v1/sites/{site_id}", "getSite", "One site.", {200: Body(SiteView, _VIEW)},
        params=(_ID,), problems=(404, 503), tags=_TAGS,
    ),
    Operation(
        "PATCH", "/v1/sites/{site_id}", "updateSite", "Rename, move or re-zone a site.",
        {200: Body(SiteView, _VIEW)}, params=(_ID,),
        body=Body(SitePatch, SitePatch(name="Riverside"), "At least one field, not null.",
                  also={"anyOf": [{"required": [f], "properties": {f: {"type": t}}}
                                  for f, t in (("name", "string"), ("timezone", "string"),
                                               ("location", "object"))]}),
        problems=(403, 404, 409, 422, 503), tags=_TAGS,
    ),
    Operation(
        "DELETE", "/v1/sites/{site_id}", "removeSite",
        "Remove a site and its areas; its mowers stay, without a site.",
        {204: "Removed."}, params=(_ID,), problems=(403, 404, 409, 503), tags=_TAGS,
    ),
    Operation(
        "PUT", "/v1/sites/{site_id}/areas", "putSiteAreas",
        "Replace every area of a site (a 422 names the refused feature); version + 1.",
        {200: Body(AreasView, _OUT, "Stored and published as `site.areas_changed`.")},
        params=(_ID,), body=Body(FeatureCollection, _IN),
        problems=(400, 403, 404, 415, 422, 503), tags=_TAGS,
    ),
    Operation(
        "GET", "/v1/sites/{site_id}/areas", "getSiteAreas", "A site's areas with their version.",
        {200: Body(AreasView, _OUT)}, params=(_ID,), problems=(404, 503), tags=_TAGS,
    ),
    Operation(
        "GET", "/v1/sites/{site_id}/members", "listSiteMembers",
        "The users with a role on the site.",
        {200: Body(MembersView, MembersView(members=[MemberView(user_id="sam", role="viewer")]))},
        params=(_ID,), problems=(403, 404, 503), tags=_TAGS,
    ),
    Operation(
        "PUT", "/v1/sites/{site_id}/members/{user_id}", "putSiteMember",
        "Make a user viewer or operator of the site (exactly that role on it).",
        {204: "Granted."}, params=(_ID, _USER), body=Body(MemberGrant, MemberGrant(role="viewer")),
        problems=(403, 404, 422, 503), tags=_TAGS,
    ),
    Operation(
        "DELETE", "/v1/sites/{site_id}/members/{user_id}", "removeSiteMember",
        "Take a user's role on the site away.",
        {204: "Revoked."}, params=(_ID, _USER), problems=(403, 404, 422, 503), tags=_TAGS,
    ),
)  # fmt: skip
