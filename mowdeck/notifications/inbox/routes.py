"""The Notifications HTTP API: preferences and the inbox (docs/notifications.md, "HTTP API").

Every route needs a bearer token and answers 403 to a user who can view no mower of the
token's account (``access.py``). Errors are problem documents; a request body that
cannot be stored names every field at fault in ``errors``.
"""

from __future__ import annotations

import uuid
import zoneinfo
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec
import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry

from mowdeck.authn import DenyList, TokenVerifier, auth_middleware, principal
from mowdeck.authz import Authorizer, AuthzUnavailableError
from mowdeck.kit.cors import CorsPolicy
from mowdeck.kit.http import (
    Problem,
    Readiness,
    authz_unavailable,
    json_response,
    read_json,
    service_app,
)
from mowdeck.notifications.errors import StoreError, TemplateError
from mowdeck.notifications.inbox import preferences as prefs_doc
from mowdeck.notifications.inbox.access import Access, AccessCache, MowerAccount, access_of
from mowdeck.notifications.inbox.model import CursorError, InboxCursor, InboxItem
from mowdeck.notifications.inbox.ports import InboxStore, PreferencesStore
from mowdeck.notifications.inbox.preferences import Preferences, PreferencesError
from mowdeck.notifications.rules.kinds import Severity
from mowdeck.notifications.rules.templates import render
from mowdeck.notifications.settings import NotificationsSettings

__all__ = [
    "DEPS",
    "INBOX_DEFAULT_LIMIT",
    "INBOX_MAX_LIMIT",
    "ApiDeps",
    "caller",
    "create_app",
    "invalid",
    "routes",
    "viewers_only",
]

log = structlog.get_logger("mowdeck.notifications.inbox.routes")

INBOX_DEFAULT_LIMIT = 50
INBOX_MAX_LIMIT = 200
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class ApiDeps:
    """What the API handlers need."""

    inbox: InboxStore
    preferences: PreferencesStore
    authorizer: Authorizer
    settings: NotificationsSettings
    clock: Callable[[], datetime]
    mower_account: MowerAccount
    # Callers' access kept for the decisions' lifetime (None: asked on every request).
    access: AccessCache | None = None


DEPS = web.AppKey("notifications_deps", ApiDeps)


async def caller(request: web.Request) -> tuple[ApiDeps, Access]:
    """The deps and the caller's access; a 403 problem for a user who can view nothing."""
    deps = request.app[DEPS]
    found = await access_of(principal(request), deps.access, deps.authorizer, deps.mower_account)
    return deps, found


def invalid(found: Sequence[prefs_doc.Violation], *, type_: str) -> Problem:
    """A 422 naming each field at fault (a 400 when the body itself is no document)."""
    errors = [{"field": p.field, "reason": p.reason} for p in found]
    detail = "; ".join(f"{p.field or 'body'}: {p.reason}" for p in found)
    if any(not p.field for p in found):
        return Problem(400, "Bad Request", detail, type_="bad-request", extra={"errors": errors})
    return Problem(
        422,
        "Unprocessable Content",
        detail,
        type_=type_,
        extra={"field": found[0].field, "errors": errors},
    )


def _bad_query(name: str, reason: str) -> Problem:
    return Problem(
        400,
        "Bad Request",
        f"`{name}` {reason}",
        type_="bad-query",
        extra={"field": name, "errors": [{"field": name, "reason": reason}]},
    )


# -- preferences ---------------------------------------------------------------------------


def _preferences_body(prefs: Preferences) -> Preferences:
    # Every kind, a missing one at its default.
    return msgspec.structs.replace(prefs, kinds=dict(prefs.enabled()))


def _hidden_mowers(body: bytes, hidden: list[uuid.UUID]) -> Problem:
    # The positions in the body as sent (decoding dropped repeats), like a 422 names them.
    sent = msgspec.json.decode(body, type=dict[str, Any]).get("mowers", [])
    position = {}
    for index, text in reversed(list(enumerate(sent))):
        position[uuid.UUID(text)] = index
    errors = [
        {
            "field": f"mowers[{position[m]}]",
            "reason": "no such mower is visible to you",
            "mower_id": str(m),
        }
        for m in hidden
    ]
    # Not in the account and not viewable look the same: neither says the mower exists.
    return Problem(
        404,
        "Not Found",
        f"no mower {hidden[0]} is visible to you",
        type_="not-found",
        extra={"field": errors[0]["field"], "errors": errors},
    )


async def get_preferences(request: web.Request) -> web.Response:
    """``GET /v1/notifications/preferences``: the saved document, or the defaults."""
    deps, access = await caller(request)
    saved = await deps.preferences.get_preferences(access.user_id)
    return json_response(_preferences_body(saved or Preferences()))


async def put_preferences(request: web.Request) -> web.Response:
    """``PUT /v1/notifications/preferences``: replace the document; answers the stored one."""
    deps, access = await caller(request)
    body = await read_json(request)
    try:
        prefs = prefs_doc.decode_preferences(body)
    except PreferencesError as err:
        raise invalid(err.violations, type_="invalid-preferences") from err
    hidden = [m for m in prefs.mowers if not access.can_view(m)]
    if hidden:
        raise _hidden_mowers(body, hidden)
    await deps.preferences.put_preferences(access.user_id, access.account_id, prefs)
    stored = await deps.preferences.get_preferences(access.user_id)
    return json_response(_preferences_body(stored or prefs))


# -- inbox -----------------------------------------------------------------------------------


def _limit(request: web.Request) -> int:
    text = request.query.get("limit")
    if text is None:
        return INBOX_DEFAULT_LIMIT
    reason = f"must be a whole number from 1 to {INBOX_MAX_LIMIT}"
    if not text.isdecimal() or len(text) > 4:
        raise _bad_query("limit", reason)
    value = int(text)
    if not 1 <= value <= INBOX_MAX_LIMIT:
        raise _bad_query("limit", reason)
    return value


def _cursor(request: web.Request) -> InboxCursor | None:
    # ``before`` is this parameter's first name (the inbox runs newest first); every list
    # now says ``after``, and it wins when both are given.
    field = "after" if "after" in request.query else "before"
    text = request.query.get(field)
    if text is None:
        return None
    try:
        return InboxCursor.decode(text)
    except CursorError:
        raise _bad_query(field, "is not a cursor this inbox handed out") from None


class InboxItemView(msgspec.Struct, frozen=True, kw_only=True):
    """An inbox item, rendered in the reader's locale and time zone."""

    id: uuid.UUID
    kind: str
    mower_id: uuid.UUID
    severity: Severity
    title: str
    body: str
    occurred_at: datetime
    read: bool


class InboxView(msgspec.Struct, frozen=True, kw_only=True):
    """A page of the inbox, newest first; ``next_after`` continues it while ``has_more``
    (``next`` is the same cursor under its first name); ``unread`` counts the whole inbox."""

    items: list[InboxItemView]
    next: str | None
    next_after: str | None
    has_more: bool
    unread: int


def _item_body(item: InboxItem, prefs: Preferences) -> InboxItemView:
    try:
        title, body = render(item.message_key, item.params, prefs.locale, prefs.timezone)
    except (TemplateError, zoneinfo.ZoneInfoNotFoundError) as err:
        # One item a release can no longer render must not hide the whole inbox.
        log.error(
            "inbox item not rendered", item_id=str(item.id), mower_id=item.mower_id, error=str(err)
        )
        title, body = item.message_key, ""
    return InboxItemView(
        id=item.id,
        kind=item.kind,
        mower_id=item.mower_id,
        severity=item.severity,
        title=title,
        body=body,
        occurred_at=item.occurred_at,
        read=item.read,
    )


async def get_inbox(request: web.Request) -> web.Response:
    """``GET /v1/notifications/inbox?limit&after``: a page, newest first, rendered."""
    deps, access = await caller(request)
    limit, cursor = _limit(request), _cursor(request)
    prefs = await deps.preferences.get_preferences(access.user_id) or Preferences()
    page = await deps.inbox.inbox_page(access.user_id, limit, cursor)
    unread = await deps.inbox.unread_count(access.user_id)
    after = None if page.next is None else page.next.encode()
    return json_response(
        InboxView(
            items=[_item_body(item, prefs) for item in page.items],
            next=after,
            next_after=after,
            has_more=after is not None,
            unread=unread,
        )
    )


async def post_read(request: web.Request) -> web.Response:
    """``POST /v1/notifications/inbox/{item_id}/read``: mark one of the caller's items read."""
    deps, access = await caller(request)
    text = request.match_info["item_id"]
    missing = Problem(404, "Not Found", f"no inbox item {text} is yours", type_="not-found")
    try:
        item_id = uuid.UUID(text)
    except ValueError:
        raise missing from None
    if item_id not in await deps.inbox.mark_read(access.user_id, [item_id]):
        raise missing
    return web.Response(status=204)


# -- the application ---------------------------------------------------------------------------


def routes() -> list[web.RouteDef]:
    """The preferences and inbox routes."""
    return [
        web.get("/v1/notifications/preferences", get_preferences),
        web.put("/v1/notifications/preferences", put_preferences),
        web.get("/v1/notifications/inbox", get_inbox),
        web.post("/v1/notifications/inbox/{item_id}/read", post_read),
    ]


@web.middleware
async def _store_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except AuthzUnavailableError as err:
        raise authz_unavailable() from err
    except StoreError as err:
        log.warning("store unavailable", path=request.path, error=str(err))
        raise Problem(
            503,
            "Service Unavailable",
            "the notification store is unavailable",
            type_="unavailable",
            headers={"Retry-After": "1"},
        ) from err


def create_app(
    deps: ApiDeps,
    verifier: TokenVerifier,
    readiness: Readiness,
    metrics_registry: CollectorRegistry,
    *,
    denylist: DenyList | None = None,
    extra_routes: Sequence[web.RouteDef] = (),
) -> web.Application:
    """The Notifications HTTP application: ``routes()``, ``extra_routes`` and ops routes; the
    delivery's target routes are added to it (``delivery.routes.add_target_routes``) behind
    ``viewers_only``."""
    app = service_app(
        "notifications",
        readiness,
        metrics_registry,
        middlewares=[auth_middleware(verifier, denylist=denylist), _store_errors],
        cors=CorsPolicy(deps.settings.http_cors_origins),
    )
    app[DEPS] = deps
    app.add_routes([*routes(), *extra_routes])
    return app


def viewers_only(handler: Handler) -> Handler:
    """``handler`` behind the API's 403 for a user who can view nothing (ADR 0022: such a
    user cannot use the API at all, the delivery's target routes included)."""

    async def guarded(request: web.Request) -> web.StreamResponse:
        await caller(request)
        return await handler(request)

    return guarded
