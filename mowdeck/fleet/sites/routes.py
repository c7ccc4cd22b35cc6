"""HTTP routes of sites: thin handlers over ``Sites``; errors through Fleet's middleware."""

from __future__ import annotations

import uuid

from aiohttp import web

from mowdeck.authn import principal
from mowdeck.fleet import rules
from mowdeck.fleet.errors import InvalidRequestError, SiteNotFoundError
from mowdeck.fleet.sites.model import (
    MemberGrant,
    MembersView,
    SiteCreate,
    SitePage,
    SitePatch,
    feature_collection,
    site_view,
)
from mowdeck.fleet.sites.usecases import Sites
from mowdeck.fleet.sites.validation import decode_document
from mowdeck.kit.http import json_response, read_json
from mowdeck.kit.paging import cursor_of, page_params, read_cursor

__all__ = ["SITES", "site_routes"]

SITES = web.AppKey("sites", Sites)
SITE_PAGE = 100
MAX_SITE_PAGE = 1000
_USER_MAX = 200


def _site_id(request: web.Request) -> uuid.UUID:
    try:
        return uuid.UUID(request.match_info["site_id"])
    except ValueError:
        raise SiteNotFoundError("no such site") from None


def _user_id(request: web.Request) -> str:
    user = request.match_info["user_id"]
    if not 1 <= len(user) <= _USER_MAX or any(c in user for c in ":#* "):
        raise InvalidRequestError("user_id", "`user_id` is a user's id (a token's sub)")
    return user


async def create_site(request: web.Request) -> web.Response:
    """``POST /v1/sites``."""
    body = rules.decode_body(await read_json(request), SiteCreate)
    record = await request.app[SITES].create(principal(request), body)
    return json_response(site_view(record), status=201)


async def list_sites(request: web.Request) -> web.Response:
    """``GET /v1/sites?limit=&after=``: a page of the caller's sites, by name then id."""
    params = page_params(request.query, default=SITE_PAGE, maximum=MAX_SITE_PAGE)
    after = None if params.after is None else read_cursor(params.after, tuple[str, uuid.UUID])
    records, more = await request.app[SITES].visible_page(principal(request), after, params.limit)
    last = records[-1] if records and more else None
    return json_response(
        SitePage(
            sites=[site_view(r) for r in records],
            next_after=None if last is None else cursor_of([last.name, last.site_id]),
            has_more=more,
        )
    )


async def get_site(request: web.Request) -> web.Response:
    """``GET /v1/sites/{site_id}``."""
    record = await request.app[SITES].get(principal(request), _site_id(request))
    return json_response(site_view(record))


async def patch_site(request: web.Request) -> web.Response:
    """``PATCH /v1/sites/{site_id}``."""
    site_id = _site_id(request)
    body = rules.decode_body(await read_json(request), SitePatch)
    record = await request.app[SITES].update(principal(request), site_id, body)
    return json_response(site_view(record))


async def delete_site(request: web.Request) -> web.Response:
    """``DELETE /v1/sites/{site_id}``: its mowers stay, without a site."""
    await request.app[SITES].remove(principal(request), _site_id(request))
    return web.Response(status=204)


async def put_areas(request: web.Request) -> web.Response:
    """``PUT /v1/sites/{site_id}/areas``: a GeoJSON FeatureCollection replaces every area."""
    site_id = _site_id(request)
    raw = await read_json(request, also=("application/geo+json",))
    record = await request.app[SITES].put_areas(principal(request), site_id, decode_document(raw))
    return json_response(feature_collection(record))


async def get_areas(request: web.Request) -> web.Response:
    """``GET /v1/sites/{site_id}/areas``: the FeatureCollection with its ``version``."""
    record = await request.app[SITES].get_areas(principal(request), _site_id(request))
    return json_response(feature_collection(record))


async def list_members(request: web.Request) -> web.Response:
    """``GET /v1/sites/{site_id}/members``."""
    found = await request.app[SITES].members(principal(request), _site_id(request))
    return json_response(MembersView(members=found))


async def put_member(request: web.Request) -> web.Response:
    """``PUT /v1/sites/{site_id}/members/{user_id}`` ``{"role": "viewer" | "operator"}``."""
    site_id, user = _site_id(request), _user_id(request)
    body = rules.decode_body(await read_json(request), MemberGrant)
    await request.app[SITES].set_member(principal(request), site_id, user, body.role)
    return web.Response(status=204)


async def delete_member(request: web.Request) -> web.Response:
    """``DELETE /v1/sites/{site_id}/members/{user_id}``: the user's role on the site goes."""
    site_id, user = _site_id(request), _user_id(request)
    await request.app[SITES].set_member(principal(request), site_id, user, None)
    return web.Response(status=204)


def site_routes() -> list[web.RouteDef]:
    """The routes of sites, their areas and their members."""
    return [
        web.post("/v1/sites", create_site),
        web.get("/v1/sites", list_sites),
        web.get("/v1/sites/{site_id}", get_site),
        web.patch("/v1/sites/{site_id}", patch_site),
        web.delete("/v1/sites/{site_id}", delete_site),
        web.put("/v1/sites/{site_id}/areas", put_areas),
        web.get("/v1/sites/{site_id}/areas", get_areas),
        web.get("/v1/sites/{site_id}/members", list_members),
        web.put("/v1/sites/{site_id}/members/{user_id}", put_member),
        web.delete("/v1/sites/{site_id}/members/{user_id}", delete_member),
    ]
