"""The alarms' audit trail over HTTP: ``GET /v1/alarms/audit`` and its export.

Account admins only, as Fleet's trail of commands (a 403 problem for anyone else): the
trail names people, and who acknowledged what is the account's business, not a viewer's.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

import msgspec
from aiohttp import web

from mowdeck.authn import Principal, principal
from mowdeck.authz import AuthzUnavailableError, account_object, user_ref
from mowdeck.kit.export import ndjson_export
from mowdeck.kit.http import Problem, authz_unavailable, json_response
from mowdeck.kit.paging import cursor_of
from mowdeck.notifications.alarms.audit import (
    AuditPageView,
    AuditQuery,
    AuditRecord,
    AuditView,
    audit_query,
)
from mowdeck.notifications.alarms.routes import ALARM_DEPS, AlarmDeps
from mowdeck.notifications.errors import StoreError

__all__ = ["audit_routes"]

_EXPORT_PAGE = 1000
_encoder = msgspec.json.Encoder()


async def _admin(request: web.Request) -> tuple[AlarmDeps, Principal]:
    deps, who = request.app[ALARM_DEPS], principal(request)
    try:
        allowed = await deps.authorizer.check(
            user_ref(who.user_id), "can_admin_mowers", account_object(who.account_id)
        )
    except AuthzUnavailableError as err:
        raise authz_unavailable() from err
    if not allowed:
        raise Problem(
            403, "Forbidden", "the audit trail needs the account's admin role", type_="forbidden"
        )
    return deps, who


async def get_audit(request: web.Request) -> web.Response:
    """``GET /v1/alarms/audit?mower=&change=&from=&to=&limit=&after=``: newest first."""
    deps, who = await _admin(request)
    query = audit_query(request.query, who.account_id, now=deps.clock())
    rows = await deps.alarms.audit_page(msgspec.structs.replace(query, limit=query.limit + 1))
    page, more = rows[: query.limit], len(rows) > query.limit
    return json_response(
        AuditPageView(
            items=[AuditView.of(r) for r in page],
            next_after=cursor_of(page[-1].seq) if more else None,
            has_more=more,
        )
    )


async def _pages(deps: AlarmDeps, query: AuditQuery) -> AsyncGenerator[list[AuditRecord], None]:
    while True:
        page = await deps.alarms.audit_page(query)
        if page:
            yield page
        if len(page) < query.limit:
            return
        query = msgspec.structs.replace(query, before=page[-1].seq)


async def export_audit(request: web.Request) -> web.StreamResponse:
    """``GET /v1/alarms/audit/export?mower=&change=&from=&to=``: every match as JSON lines."""
    deps, who = await _admin(request)
    query = audit_query(request.query, who.account_id, now=deps.clock())
    pages = _pages(deps, msgspec.structs.replace(query, limit=_EXPORT_PAGE))
    return await ndjson_export(
        request,
        pages,
        lambda r: _encoder.encode(AuditView.of(r)),
        failures=(StoreError,),
        what="alarm audit",
    )


def audit_routes() -> list[web.RouteDef]:
    """The trail's routes."""
    return [
        web.get("/v1/alarms/audit", get_audit),
        web.get("/v1/alarms/audit/export", export_audit),
    ]
