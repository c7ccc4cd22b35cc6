"""HTTP routes of the schedules: thin handlers over ``Schedules``."""

from __future__ import annotations

import uuid

from aiohttp import web

from mowdeck.authn import principal
from mowdeck.fleet import rules
from mowdeck.fleet.errors import MowerNotFoundError, SiteNotFoundError
from mowdeck.fleet.schedules.rules import OverrideRequest, RestrictionRequest, ScheduleRequest
from mowdeck.fleet.schedules.usecases import Schedules
from mowdeck.fleet.schedules.views import RestrictionList
from mowdeck.kit.http import json_response, read_json

__all__ = ["SCHEDULES", "routes"]

SCHEDULES = web.AppKey("schedules", Schedules)


def _id(request: web.Request, name: str) -> uuid.UUID:
    try:
        return uuid.UUID(request.match_info[name])
    except ValueError:
        error = MowerNotFoundError if name == "mower_id" else SiteNotFoundError
        raise error(f"no such {name.removesuffix('_id')}") from None


async def put_schedule(request: web.Request) -> web.Response:
    """``PUT /v1/mowers/{id}/schedule``."""
    body = rules.decode_body(await read_json(request), ScheduleRequest)
    view = await request.app[SCHEDULES].put(principal(request), _id(request, "mower_id"), body)
    return json_response(view)


async def get_schedule(request: web.Request) -> web.Response:
    """``GET /v1/mowers/{id}/schedule``."""
    view = await request.app[SCHEDULES].view(principal(request), _id(request, "mower_id"))
    return json_response(view)


async def override_mower(request: web.Request) -> web.Response:
    """``POST /v1/mowers/{id}/schedule/override``."""
    body = rules.decode_body(await read_json(request), OverrideRequest)
    schedules = request.app[SCHEDULES]
    view = await schedules.override_mower(
        principal(request), _id(request, "mower_id"), body.override
    )
    return json_response(view)


async def override_site(request: web.Request) -> web.Response:
    """``POST /v1/sites/{id}/schedule/override``."""
    body = rules.decode_body(await read_json(request), OverrideRequest)
    schedules = request.app[SCHEDULES]
    view = await schedules.override_site(principal(request), _id(request, "site_id"), body.override)
    return json_response(view)


async def post_restriction(request: web.Request) -> web.Response:
    """``POST /v1/sites/{id}/restrictions``."""
    body = rules.decode_body(await read_json(request), RestrictionRequest)
    view = await request.app[SCHEDULES].restrict(principal(request), _id(request, "site_id"), body)
    return json_response(view, status=201)


async def list_restrictions(request: web.Request) -> web.Response:
    """``GET /v1/sites/{id}/restrictions``."""
    found = await request.app[SCHEDULES].restrictions(principal(request), _id(request, "site_id"))
    return json_response(RestrictionList(restrictions=found))


async def delete_restriction(request: web.Request) -> web.Response:
    """``DELETE /v1/sites/{id}/restrictions/{restriction_id}``."""
    site, restriction = _id(request, "site_id"), _id(request, "restriction_id")
    await request.app[SCHEDULES].lift(principal(request), site, restriction)
    return web.Response(status=204)


def routes() -> list[web.RouteDef]:
    """The schedule routes."""
    return [
        web.put("/v1/mowers/{mower_id}/schedule", put_schedule),
        web.get("/v1/mowers/{mower_id}/schedule", get_schedule),
        web.post("/v1/mowers/{mower_id}/schedule/override", override_mower),
        web.post("/v1/sites/{site_id}/schedule/override", override_site),
        web.post("/v1/sites/{site_id}/restrictions", post_restriction),
        web.get("/v1/sites/{site_id}/restrictions", list_restrictions),
        web.delete("/v1/sites/{site_id}/restrictions/{restriction_id}", delete_restriction),
    ]
