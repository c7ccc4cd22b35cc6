"""The alarms API: list, acknowledge, assign (docs/notifications.md, "Alarms").

An alarm is seen by who may view its mower (the caller's ``Access``, as the inbox counts
it: a 403 when they can view nothing in their account, a 404 for an alarm of a mower they
cannot view); acknowledging and assigning take ``can_operate`` on the mower (a 403 for a
viewer). Lists page newest first with ``limit`` and an opaque ``after`` cursor.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec
import structlog
from aiohttp import web

from mowdeck.authn import principal
from mowdeck.authz import Authorizer, AuthzUnavailableError, mower_object, user_ref
from mowdeck.kit.http import Problem, authz_unavailable, json_response, read_json
from mowdeck.kit.paging import cursor_of, page_params, read_cursor
from mowdeck.notifications.alarms.feed import Written
from mowdeck.notifications.alarms.model import (
    ALARM_STATES,
    Alarm,
    AlarmCursor,
    AlarmPageView,
    AlarmQuery,
    AlarmState,
    AlarmView,
)
from mowdeck.notifications.alarms.ports import AlarmStore
from mowdeck.notifications.inbox.access import Access, AccessCache, MowerAccount, access_of
from mowdeck.notifications.metrics import NotificationsMetrics
from mowdeck.notifications.rules.kinds import Severity

__all__ = [
    "ALARM_DEPS",
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "Acknowledgement",
    "AlarmDeps",
    "Assignment",
    "alarm_routes",
]

log = structlog.get_logger("mowdeck.notifications.alarms")

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
MAX_COMMENT = 1000
_SEVERITIES: tuple[Severity, ...] = Severity.__args__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class AlarmDeps:
    """What the alarm handlers need."""

    alarms: AlarmStore
    authorizer: Authorizer
    mower_account: MowerAccount
    metrics: NotificationsMetrics
    clock: Callable[[], datetime]
    # Told of every acknowledgement and assignment (the announcer follows it).
    feed: Callable[[Written], object] = lambda _written: None
    # Callers' access kept for the decisions' lifetime (None: asked on every request).
    access: AccessCache | None = None


ALARM_DEPS = web.AppKey("notifications_alarm_deps", AlarmDeps)


class Acknowledgement(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``POST /v1/alarms/{id}/acknowledge``'s body (optional)."""

    comment: str | None = None


class Assignment(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``POST /v1/alarms/{id}/assign``'s body: a user id, or null for nobody."""

    assignee: str | None


def _bad(name: str, reason: str, status: int = 400) -> Problem:
    title = "Bad Request" if status == 400 else "Unprocessable Content"
    return Problem(
        status,
        title,
        f"`{name}` {reason}",
        type_="bad-query" if status == 400 else "invalid-body",
        extra={"field": name, "errors": [{"field": name, "reason": reason}]},
    )


def _query(request: web.Request, access: Access) -> tuple[AlarmQuery, AlarmCursor | None]:
    q = request.query
    states: frozenset[AlarmState] = frozenset({"active", "acknowledged"})
    if "state" in q:
        if q["state"] not in ALARM_STATES:
            raise _bad("state", f"must be one of {', '.join(ALARM_STATES)}")
        states = frozenset({q["state"]})
    severity = q.get("severity")
    if severity is not None and severity not in _SEVERITIES:
        raise _bad("severity", f"must be one of {', '.join(_SEVERITIES)}")
    mowers = None if access.whole_account else access.mowers
    if "mower" in q:
        try:
            mower = uuid.UUID(q["mower"])
        except ValueError:
            raise _bad("mower", "must be a mower id") from None
        # A mower the caller cannot view lists nothing, as one without alarms does.
        mowers = frozenset({mower}) if access.can_view(mower) else frozenset()
    page = page_params(q, default=DEFAULT_LIMIT, maximum=MAX_LIMIT)
    after = None if page.after is None else read_cursor(page.after, AlarmCursor)
    limit = page.limit
    query = AlarmQuery(
        account_id=access.account_id,
        mowers=mowers,
        states=states,
        severity=severity,
        limit=limit,
    )
    return query, after


async def _access(request: web.Request) -> tuple[AlarmDeps, Access]:
    deps = request.app[ALARM_DEPS]
    found = await access_of(principal(request), deps.access, deps.authorizer, deps.mower_account)
    return deps, found


async def list_alarms(request: web.Request) -> web.Response:
    """``GET /v1/alarms?state&mower&severity&limit&after``: newest first."""
    deps, access = await _access(request)
    query, after = _query(request, access)
    page = await deps.alarms.list_alarms(query, after)
    more = page.next is not None
    return json_response(
        AlarmPageView(
            items=[AlarmView.of(a) for a in page.items],
            next_after=cursor_of(page.next) if page.next is not None else None,
            has_more=more,
        )
    )


async def _operable(request: web.Request) -> tuple[AlarmDeps, Access, Alarm]:
    """The alarm of the path, which the caller may operate on (404, then 403)."""
    deps, access = await _access(request)
    text = request.match_info["alarm_id"]
    missing = Problem(404, "Not Found", f"no alarm {text} is visible to you", type_="not-found")
    try:
        alarm_id = uuid.UUID(text)
    except ValueError:
        raise missing from None
    alarm = await deps.alarms.get_alarm(access.account_id, alarm_id)
    if alarm is None or not access.can_view(alarm.mower_id):
        raise missing
    try:
        allowed = await deps.authorizer.check(
            user_ref(access.user_id), "can_operate", mower_object(alarm.mower_id)
        )
    except AuthzUnavailableError as err:
        raise authz_unavailable() from err
    if not allowed:
        raise Problem(
            403,
            "Forbidden",
            "acknowledging and assigning take the operator role",
            type_="forbidden",
        )
    return deps, access, alarm


def _decode(body: bytes, kind: type[Any]) -> Any:
    try:
        return msgspec.json.decode(body, type=kind)
    except msgspec.ValidationError as err:
        raise _bad("body", str(err), status=422) from None
    except msgspec.DecodeError:
        raise _bad("body", "is not JSON") from None


async def acknowledge(request: web.Request) -> web.Response:
    """``POST /v1/alarms/{alarm_id}/acknowledge`` ``{"comment"?}``: the alarm after."""
    deps, access, alarm = await _operable(request)
    body = Acknowledgement()
    if request.can_read_body:
        body = _decode(await read_json(request), Acknowledgement)
    if body.comment is not None and len(body.comment) > MAX_COMMENT:
        raise _bad("comment", f"is longer than {MAX_COMMENT} characters", status=422)
    now = deps.clock()
    after = await deps.alarms.acknowledge(alarm, access.user_id, body.comment, now)
    if alarm.acknowledged_at is None and after.acknowledged_at is not None:
        waited = (after.acknowledged_at - alarm.first_at).total_seconds()
        deps.metrics.alarm_acknowledge_seconds.labels(kind=alarm.kind).observe(max(waited, 0.0))
    log.info("alarm acknowledged", alarm_id=str(alarm.id), mower_id=str(alarm.mower_id))
    deps.feed([(after, "acknowledged")])
    return json_response(AlarmView.of(after))


async def assign(request: web.Request) -> web.Response:
    """``POST /v1/alarms/{alarm_id}/assign`` ``{"assignee": user id | null}``."""
    deps, access, alarm = await _operable(request)
    body: Assignment = _decode(await read_json(request), Assignment)
    if body.assignee is not None:
        if not body.assignee or len(body.assignee) > 200:
            raise _bad("assignee", "must be a user id", status=422)
        try:
            can_view = await deps.authorizer.check(
                user_ref(body.assignee), "can_view", mower_object(alarm.mower_id)
            )
        except AuthzUnavailableError as err:
            raise authz_unavailable() from err
        if not can_view:
            raise _bad("assignee", "cannot view this alarm's mower", status=422)
    after = await deps.alarms.assign(alarm, body.assignee, access.user_id, deps.clock())
    deps.feed([(after, "assigned")])
    return json_response(AlarmView.of(after))


def alarm_routes() -> list[web.RouteDef]:
    """The alarm routes."""
    return [
        web.get("/v1/alarms", list_alarms),
        web.post("/v1/alarms/{alarm_id}/acknowledge", acknowledge),
        web.post("/v1/alarms/{alarm_id}/assign", assign),
    ]
