"""HTTP routes of Fleet: thin handlers over ``Fleet``, errors as problem+json."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace

import msgspec
import structlog
from aiohttp import web

from contracts.v1 import FINAL_STATUSES
from mowdeck.authn import principal
from mowdeck.authz import AuthzUnavailableError
from mowdeck.fleet import rules
from mowdeck.fleet.audit import audit_query
from mowdeck.fleet.audit import cursor_of as audit_cursor_of
from mowdeck.fleet.errors import (
    AreaRefusedError,
    BadQueryError,
    CommandNotFoundError,
    EndpointTakenError,
    FleetError,
    ForbiddenError,
    InvalidRequestError,
    MowerExistsError,
    MowerNotFoundError,
    SiteNotFoundError,
    ValueRefusedError,
    VersionConflictError,
)
from mowdeck.fleet.limits import COMMAND_LIMITS
from mowdeck.fleet.rules import CommandRequest, PatchRequest, RegisterRequest
from mowdeck.fleet.usecases import Fleet
from mowdeck.fleet.views import (
    AuditPage,
    CommandAccepted,
    CommandView,
    MowerPage,
    StatusView,
    mower_view,
)
from mowdeck.kit.bus import BusError, ExpiredCommandError
from mowdeck.kit.export import ndjson_export
from mowdeck.kit.http import Problem, authz_unavailable, json_response, read_json
from mowdeck.kit.logging import bind
from mowdeck.kit.paging import cursor_of, page_params, read_cursor

__all__ = [
    "FLEET",
    "fleet_errors",
    "problem_of",
    "routes",
]

FLEET = web.AppKey("fleet", Fleet)
log = structlog.get_logger("mowdeck.fleet")
_encoder = msgspec.json.Encoder()
_EXPORT_PAGE = 500
MOWER_PAGE = 100
MAX_MOWER_PAGE = 1000
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def problem_of(  # noqa: PLR0911, PLR0912 - one per error kind
    err: FleetError | BusError | AuthzUnavailableError,
) -> Problem:
    """The problem document of a Fleet error (or of a collaborator Fleet relies on)."""
    match err:
        case BadQueryError(field=field, out_of_range=True):
            return Problem(
                422,
                "Unprocessable Content",
                err.detail,
                type_="invalid-request",
                extra={"field": field},
            )
        case BadQueryError(field=field):
            return Problem(
                400, "Bad Request", err.detail, type_="bad-request", extra={"field": field}
            )
        case InvalidRequestError(field="") | InvalidRequestError(field="body"):
            return Problem(400, "Bad Request", err.detail, type_="bad-request")
        case InvalidRequestError(field=field):
            return Problem(
                422,
                "Unprocessable Content",
                err.detail,
                type_="invalid-request",
                extra={"field": field},
            )
        case AreaRefusedError(field=field, index=index, name=name):
            return Problem(
                422,
                "Unprocessable Content",
                err.detail,
                type_="invalid-area",
                extra={"field": field, "feature": index, "name": name},
            )
        case ValueRefusedError():
            return Problem(422, "Unprocessable Content", str(err), type_="invalid-request")
        case MowerNotFoundError() | CommandNotFoundError() | SiteNotFoundError():
            return Problem(404, "Not Found", str(err), type_="not-found")
        case ForbiddenError():
            return Problem(403, "Forbidden", str(err), type_="forbidden")
        case MowerExistsError() | VersionConflictError():
            return Problem(409, "Conflict", str(err), type_="conflict")
        case EndpointTakenError(field=field):
            return Problem(
                409, "Conflict", err.detail, type_="endpoint-taken", extra={"field": field}
            )
        case ExpiredCommandError():
            # Only a longer lifetime helps, not a retry of the same request.
            return Problem(
                422,
                "Unprocessable Content",
                "`ttl_s`: the command expired before it could be sent; ask for a longer `ttl_s`",
                type_="invalid-request",
                extra={"field": "ttl_s"},
            )
        case AuthzUnavailableError():
            return authz_unavailable()
        case BusError():
            return Problem(
                503,
                "Service Unavailable",
                "the bus refused the command",
                type_="unavailable",
                headers={"Retry-After": "1"},
            )
    return Problem(
        503,
        "Service Unavailable",
        "the registry is unavailable",
        type_="unavailable",
        headers={"Retry-After": "1"},
    )


def _mower_id(request: web.Request) -> uuid.UUID:
    try:
        return uuid.UUID(request.match_info["mower_id"])
    except ValueError:
        raise MowerNotFoundError("no such mower") from None


async def register(request: web.Request) -> web.Response:
    """``POST /v1/mowers``."""
    body = rules.decode_body(await read_json(request), RegisterRequest)
    registration, created = await request.app[FLEET].register(principal(request), body)
    return json_response(registration, status=201 if created else 200)


async def list_mowers(request: web.Request) -> web.Response:
    """``GET /v1/mowers?limit=&after=``: a page of the caller's mowers, by name then id."""
    params = page_params(request.query, default=MOWER_PAGE, maximum=MAX_MOWER_PAGE)
    after = None if params.after is None else read_cursor(params.after, tuple[str, uuid.UUID])
    records, more = await request.app[FLEET].visible_page(principal(request), after, params.limit)
    last = records[-1].registration if records and more else None
    return json_response(
        MowerPage(
            mowers=[mower_view(r) for r in records],
            next_after=None if last is None else cursor_of([last.name, last.mower_id]),
            has_more=more,
        )
    )


async def get_mower(request: web.Request) -> web.Response:
    """``GET /v1/mowers/{id}``."""
    record = await request.app[FLEET].get(principal(request), _mower_id(request))
    return json_response(mower_view(record))


async def patch_mower(request: web.Request) -> web.Response:
    """``PATCH /v1/mowers/{id}``."""
    mower_id = _mower_id(request)
    body = rules.decode_body(await read_json(request), PatchRequest)
    record = await request.app[FLEET].update(principal(request), mower_id, body)
    return json_response(mower_view(record))


async def delete_mower(request: web.Request) -> web.Response:
    """``DELETE /v1/mowers/{id}``."""
    await request.app[FLEET].remove(principal(request), _mower_id(request))
    return web.Response(status=204)


async def post_command(request: web.Request) -> web.Response:
    """``POST /v1/mowers/{id}/commands[?wait=SECONDS]``."""
    fleet = request.app[FLEET]
    mower_id = _mower_id(request)
    # Most commands carry no query: skip parsing one.
    raw_wait = request.query.get("wait") if request.query_string else None
    wait = rules.parse_wait(raw_wait, maximum=fleet.settings.command_max_wait_seconds)
    body = rules.decode_body(await read_json(request), CommandRequest)
    who = principal(request)
    # For the rest of this request (aiohttp runs each in a task of its own), the problem
    # middleware's lines included; ``issue`` adds the command's id.
    bind(mower_id=mower_id, account_id=who.account_id)
    await request.app[COMMAND_LIMITS].admit(who, body.command)
    envelope, result = await fleet.issue(who, mower_id, body, wait)
    if result is not None:
        return json_response(result, status=200)
    accepted = CommandAccepted(
        command_id=envelope.command_id, status="pending" if wait > 0 else None
    )
    return json_response(accepted, status=202)


async def get_command(request: web.Request) -> web.Response:
    """``GET /v1/mowers/{id}/commands/{command_id}``."""
    mower_id = _mower_id(request)
    try:
        command_id = uuid.UUID(request.match_info["command_id"])
    except ValueError:
        raise CommandNotFoundError("no such command") from None
    found = await request.app[FLEET].command_status(principal(request), mower_id, command_id)
    statuses = [msgspec.convert(s, StatusView) for s in found.statuses]
    return json_response(
        CommandView(
            command_id=found.command.command_id,
            mower_id=found.command.mower_id,
            kind=found.command.kind,
            issued_by=found.command.issued_by,
            issued_at=found.command.issued_at,
            expires_at=found.command.expires_at,
            statuses=statuses,
            final=any(s.status in FINAL_STATUSES for s in statuses),
        )
    )


async def get_audit(request: web.Request) -> web.Response:
    """``GET /v1/audit?mower=&from=&to=&kind=&limit=&after=``: one page, newest first."""
    who = principal(request)
    query = audit_query(request.query, who.account_id, now=request.app[FLEET].clock())
    rows = await request.app[FLEET].audit(who, replace(query, limit=query.limit + 1))
    page, more = rows[: query.limit], len(rows) > query.limit
    cursor = audit_cursor_of(page[-1]) if more else None
    return json_response(
        AuditPage(commands=page, next_after=cursor, next_cursor=cursor, has_more=more)
    )


async def export_audit(request: web.Request) -> web.StreamResponse:
    """``GET /v1/audit/export?mower=&from=&to=&kind=``: every match as JSON lines."""
    fleet, who = request.app[FLEET], principal(request)
    query = audit_query(request.query, who.account_id, now=fleet.clock())
    query = await fleet.authorize_audit(who, replace(query, limit=_EXPORT_PAGE))
    pages = fleet.audit_pages(query)
    return await ndjson_export(
        request, pages, _encoder.encode, failures=(FleetError,), what="audit"
    )


def routes() -> list[web.RouteDef]:
    """Fleet's API routes."""
    return [
        web.post("/v1/mowers", register),
        web.get("/v1/mowers", list_mowers),
        web.get("/v1/mowers/{mower_id}", get_mower),
        web.patch("/v1/mowers/{mower_id}", patch_mower),
        web.delete("/v1/mowers/{mower_id}", delete_mower),
        web.post("/v1/mowers/{mower_id}/commands", post_command),
        web.get("/v1/mowers/{mower_id}/commands/{command_id}", get_command),
        web.get("/v1/audit", get_audit),
        web.get("/v1/audit/export", export_audit),
    ]


@web.middleware
async def fleet_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Translate Fleet's errors into problems (inside ``problem_middleware``)."""
    try:
        return await handler(request)
    except (FleetError, BusError, AuthzUnavailableError) as err:
        raise problem_of(err) from err
