"""The target API: register, list and delete channel targets; the VAPID public key.

``add_target_routes(app, deps)`` adds the routes to the Notifications application, which
brings ``problem_middleware`` and ``auth_middleware``. Every refusal of a target is a 422
naming the field and the reason; an ntfy access token is never returned or logged.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import msgspec
import structlog
from aiohttp import web

from contracts.v1 import AwareDatetime
from mowdeck.authn import principal
from mowdeck.kit.http import Problem, json_response, read_json
from mowdeck.kit.paging import cursor_of, page_params, read_cursor, split_page
from mowdeck.kit.ratelimit import RequestLimit
from mowdeck.notifications.delivery.model import StoredTarget
from mowdeck.notifications.delivery.ports import TargetStore
from mowdeck.notifications.delivery.targets import (
    Getaddrinfo,
    NtfyTarget,
    TargetPolicy,
    Violation,
    WebPushSubscription,
    WebPushTarget,
    check_target_addresses,
    validate_target,
)

__all__ = [
    "ROUTES",
    "TARGET_DEPS",
    "TargetDeps",
    "TargetPage",
    "TargetView",
    "VapidKey",
    "add_target_routes",
    "target_body",
]

log = structlog.get_logger("mowdeck.notifications.delivery.routes")
TARGETS_PAGE = 100
MAX_TARGETS_PAGE = 1000
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class TargetDeps:
    """What the target handlers need; ``application_server_key`` answers None while webpush
    is not started; ``creations`` limits new targets (before anything is decoded or
    resolved)."""

    store: TargetStore
    policy: TargetPolicy
    application_server_key: Callable[[], str | None]
    getaddrinfo: Getaddrinfo | None = None
    creations: RequestLimit | None = None


TARGET_DEPS = web.AppKey("notification_target_deps", TargetDeps)


class TargetView(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A target as the API shows it: a webpush one with its ``subscription``, an ntfy one
    with its ``server`` and ``topic`` (its token only as ``token_set``)."""

    id: uuid.UUID
    channel: Literal["webpush", "ntfy", "log"]
    created_at: datetime
    subscription: WebPushSubscription | None = None
    server: str | None = None
    topic: str | None = None
    token_set: bool | None = None


class TargetPage(msgspec.Struct, frozen=True, kw_only=True):
    """A page of the caller's targets, oldest first; ``next_after`` continues it while
    ``has_more``."""

    items: list[TargetView]
    next_after: str | None
    has_more: bool


class VapidKey(msgspec.Struct, frozen=True):
    """The VAPID public key a browser subscribes with (URL-safe base64)."""

    public_key: str


def target_body(stored: StoredTarget) -> TargetView:
    """A target as the API shows it (an ntfy token only as ``token_set``)."""
    target = stored.target
    view = TargetView(id=stored.id, channel=stored.channel, created_at=stored.created_at)  # type: ignore[arg-type]
    if isinstance(target, WebPushTarget):
        return msgspec.structs.replace(view, subscription=target.subscription)
    if isinstance(target, NtfyTarget):
        return msgspec.structs.replace(
            view, server=target.server, topic=target.topic, token_set=target.token is not None
        )
    return view


def _invalid(violations: list[Violation]) -> Problem:
    errors = [{"field": p.field, "reason": p.reason} for p in violations]
    return Problem(
        422,
        "Unprocessable Content",
        "; ".join(f"`{p.field or 'body'}` {p.reason}" for p in violations),
        type_="invalid-target",
        extra={"field": violations[0].field, "errors": errors},
    )


async def post_target(request: web.Request) -> web.Response:
    """``POST /v1/notifications/targets``: 201 with the stored target."""
    deps = request.app[TARGET_DEPS]
    if deps.creations is not None:
        await deps.creations.check(request)
    caller = principal(request)
    try:
        doc = msgspec.json.decode(await read_json(request))
    except msgspec.DecodeError as err:
        raise Problem(400, "Bad Request", f"not JSON: {err}", type_="bad-json") from err
    target = validate_target(doc, deps.policy)
    if isinstance(target, list):
        raise _invalid(target)
    refused = await check_target_addresses(target, deps.policy, getaddrinfo=deps.getaddrinfo)
    if refused:
        raise _invalid(refused)
    stored = await deps.store.add_target(caller.user_id, target)
    log.info(
        "target registered",
        user_id=caller.user_id,
        target_id=str(stored.id),
        channel=stored.channel,
    )
    return json_response(target_body(stored), status=201)


async def list_targets(request: web.Request) -> web.Response:
    """``GET /v1/notifications/targets?limit=&after=``: a page of the caller's targets,
    oldest first."""
    deps = request.app[TARGET_DEPS]
    params = page_params(request.query, default=TARGETS_PAGE, maximum=MAX_TARGETS_PAGE)
    after = (
        None if params.after is None else read_cursor(params.after, tuple[AwareDatetime, uuid.UUID])
    )
    rows = await deps.store.list_targets(
        principal(request).user_id, after=after, limit=params.limit + 1
    )
    stored, more = split_page(rows, params.limit)
    last = stored[-1] if more else None
    return json_response(
        TargetPage(
            items=[target_body(s) for s in stored],
            next_after=None if last is None else cursor_of([last.created_at, last.id]),
            has_more=more,
        )
    )


async def delete_target(request: web.Request) -> web.Response:
    """``DELETE /v1/notifications/targets/{target_id}``: 204; another user's is a 404."""
    deps = request.app[TARGET_DEPS]
    text = request.match_info["target_id"]
    try:
        target_id = uuid.UUID(text)
    except ValueError:
        target_id = None
    if target_id is None or not await deps.store.delete_target(
        principal(request).user_id, target_id
    ):
        raise Problem(404, "Not Found", f"you have no target {text}", type_="not-found")
    return web.Response(status=204)


async def vapid_public_key(request: web.Request) -> web.Response:
    """``GET /v1/notifications/webpush/vapid-public-key``: ``{"public_key": ...}``."""
    key = request.app[TARGET_DEPS].application_server_key()
    if key is None:
        raise Problem(404, "Not Found", "Web Push is not enabled", type_="not-found")
    return json_response(VapidKey(key))


ROUTES = [
    web.post("/v1/notifications/targets", post_target),
    web.get("/v1/notifications/targets", list_targets),
    web.delete("/v1/notifications/targets/{target_id}", delete_target),
    web.get("/v1/notifications/webpush/vapid-public-key", vapid_public_key),
]


def add_target_routes(
    app: web.Application, deps: TargetDeps, *, guard: Callable[[Handler], Handler] | None = None
) -> None:
    """Add the target routes to ``app`` with their dependencies, each handler behind
    ``guard`` when given."""
    app[TARGET_DEPS] = deps
    if guard is None:
        app.add_routes(ROUTES)
    else:
        app.add_routes([web.route(r.method, r.path, guard(r.handler)) for r in ROUTES])
