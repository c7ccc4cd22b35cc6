"""The query API: latest state, history, track, command timeline and the account's states.

Reads are scoped three times (ADR 0017): ``can_view`` on the mower (404 when not), the
token's account in every query, and ``/v1/states`` intersects ``list_objects`` with the
account's rows unless the caller may view every mower of the account.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry

from contracts.v1 import MowerState
from mowdeck.authn import DenyList, Principal, TokenVerifier, auth_middleware, principal
from mowdeck.authz import Authorizer, AuthzUnavailableError, account_object, mower_object, user_ref
from mowdeck.kit.cors import CorsPolicy
from mowdeck.kit.http import (
    Handler,
    Problem,
    Readiness,
    authz_unavailable,
    json_response,
    service_app,
)
from mowdeck.kit.logging import bind
from mowdeck.kit.openapi import add_openapi
from mowdeck.kit.paging import cursor_of, page_params, read_cursor, split_page
from mowdeck.kit.times import EARLIEST, TimeRefusal, check_time, parse_time
from mowdeck.telemetry.bins import check_range, parse_step
from mowdeck.telemetry.errors import (
    QueryLimitError,
    StoreError,
    StoreRejectedError,
    StoreTimeoutError,
)
from mowdeck.telemetry.metrics import TelemetryMetrics
from mowdeck.telemetry.openapi import openapi
from mowdeck.telemetry.ports import TelemetryStore
from mowdeck.telemetry.settings import TelemetrySettings
from mowdeck.telemetry.views import (
    BinsPage,
    HistoryPage,
    StatePage,
    StateView,
    TimelinePage,
    TrackPage,
    state_view,
)

__all__ = ["QueryDeps", "create_app"]

log = structlog.get_logger("mowdeck.telemetry.routes")

_DEFAULT_WINDOW = timedelta(hours=24)
STATES_PAGE = 500
MAX_STATES_PAGE = 1000


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class QueryDeps:
    """What the query handlers need."""

    store: TelemetryStore
    authorizer: Authorizer
    settings: TelemetrySettings
    metrics: TelemetryMetrics
    clock: Callable[[], datetime] = _utcnow


DEPS = web.AppKey("telemetry_deps", QueryDeps)


def _not_found(mower_id: str) -> Problem:
    return Problem(404, "Not Found", f"no mower {mower_id} is visible to you", type_="not-found")


async def _visible_mower(request: web.Request) -> tuple[QueryDeps, Principal, uuid.UUID]:
    deps = request.app[DEPS]
    caller = principal(request)
    text = request.match_info["mower_id"]
    try:
        mower_id = uuid.UUID(text)
    except ValueError:
        raise _not_found(text) from None
    # For the rest of the request (aiohttp runs each in a task of its own): the store's
    # refusals and timeouts are logged naming the mower.
    bind(mower_id=mower_id, account_id=caller.account_id)
    try:
        allowed = await deps.authorizer.check(
            user_ref(caller.user_id), "can_view", mower_object(mower_id)
        )
    except AuthzUnavailableError as err:
        raise authz_unavailable() from err
    if not allowed:
        raise _not_found(text)
    return deps, caller, mower_id


def _time(request: web.Request, name: str, default: datetime, now: datetime) -> datetime:
    """The query's ``name`` time (``default`` when absent), within the range any query may
    name (``kit.times``): 400 when it is no time, 422 when it is out of that range."""
    text = request.query.get(name)
    try:
        # An empty value is a bad one (the document says a date-time), as in Fleet's audit.
        value = default if text is None else parse_time(name, text)
        return check_time(name, value, now)
    except TimeRefusal as err:
        if err.out_of_range:
            raise Problem(
                422, "Unprocessable Content", err.detail, type_="query-limit", extra={"field": name}
            ) from None
        raise Problem(
            400, "Bad Request", err.detail, type_="bad-query", extra={"field": name}
        ) from None


def _range(
    request: web.Request, deps: QueryDeps, step: timedelta | None
) -> tuple[datetime, datetime]:
    now = deps.clock()
    end = _time(request, "to", now, now)
    start = _time(request, "from", max(EARLIEST, end - _DEFAULT_WINDOW), now)
    s = deps.settings
    try:
        check_range(
            start,
            end,
            step,
            max_days=s.telemetry_query_max_range_days,
            max_rows=s.telemetry_query_max_rows,
        )
    except QueryLimitError as err:
        raise Problem(422, "Unprocessable Content", str(err), type_="query-limit") from err
    return start, end


def _state_body(state: MowerState, deps: QueryDeps) -> StateView:
    return state_view(state, deps.clock(), deps.settings.stale_after)


async def get_state(request: web.Request) -> web.Response:
    """``GET /v1/mowers/{id}/state``."""
    deps, caller, mower_id = await _visible_mower(request)
    state = await deps.store.latest(caller.account_id, mower_id)
    if state is None:
        raise Problem(
            404,
            "No telemetry yet",
            f"mower {mower_id} has not reported a state yet",
            type_="no-telemetry-yet",
        )
    return json_response(_state_body(state, deps))


async def get_history(request: web.Request) -> web.Response:
    """``GET /v1/mowers/{id}/history?from&to&step``."""
    deps, caller, mower_id = await _visible_mower(request)
    step_text = request.query.get("step")
    try:
        step = None if step_text is None else parse_step(step_text)
    except QueryLimitError as err:
        raise Problem(
            422, "Unprocessable Content", str(err), type_="query-limit", extra={"field": "step"}
        ) from err
    start, end = _range(request, deps, step)
    limit = deps.settings.telemetry_query_max_rows
    if step is not None and step_text is not None:
        bins = await deps.store.history_bins(caller.account_id, mower_id, start, end, step)
        items, cut = bins[:limit], len(bins) > limit
        return json_response(BinsPage(step=step_text, items=items, truncated=cut))
    rows = await deps.store.history(caller.account_id, mower_id, start, end, limit + 1)
    return json_response(HistoryPage(step=None, items=rows[:limit], truncated=len(rows) > limit))


async def get_track(request: web.Request) -> web.Response:
    """``GET /v1/mowers/{id}/track?from&to``."""
    deps, caller, mower_id = await _visible_mower(request)
    start, end = _range(request, deps, None)
    limit = deps.settings.telemetry_query_max_rows
    rows = await deps.store.track(caller.account_id, mower_id, start, end, limit + 1)
    return json_response(TrackPage(items=rows[:limit], truncated=len(rows) > limit))


async def get_commands(request: web.Request) -> web.Response:
    """``GET /v1/mowers/{id}/commands?from&to``: the command timeline."""
    deps, caller, mower_id = await _visible_mower(request)
    start, end = _range(request, deps, None)
    limit = deps.settings.telemetry_query_max_rows
    rows = await deps.store.timeline(caller.account_id, mower_id, start, end, limit + 1)
    return json_response(TimelinePage(items=rows[:limit], truncated=len(rows) > limit))


async def list_states(request: web.Request) -> web.Response:
    """``GET /v1/states``: the latest states of the account's mowers the caller may see."""
    deps = request.app[DEPS]
    caller = principal(request)
    user = user_ref(caller.user_id)
    try:
        if await deps.authorizer.check(user, "can_view_mowers", account_object(caller.account_id)):
            visible = None
        else:
            visible = _mower_ids(await deps.authorizer.list_objects(user, "can_view", "mower"))
    except AuthzUnavailableError as err:
        raise authz_unavailable() from err
    params = page_params(request.query, default=STATES_PAGE, maximum=MAX_STATES_PAGE)
    after = None if params.after is None else read_cursor(params.after, uuid.UUID)
    rows = (
        []
        if visible == set()
        else await deps.store.latest_of_account(
            caller.account_id, visible, after=after, limit=params.limit + 1
        )
    )
    states, more = split_page(rows, params.limit)
    return json_response(
        StatePage(
            items=[_state_body(s, deps) for s in states],
            next_after=cursor_of(states[-1].mower_id) if more else None,
            has_more=more,
        )
    )


def _mower_ids(objects: Iterable[str]) -> set[uuid.UUID]:
    # A tuple may name a mower by something that is no mower id; no row can match it.
    ids: set[uuid.UUID] = set()
    for ref in objects:
        try:
            ids.add(uuid.UUID(ref.partition(":")[2]))
        except ValueError:
            log.debug("visible object skipped: not a mower id", object=ref)
    return ids


@web.middleware
async def store_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The store's failures as problems: a refused value is the request's (422), a
    statement past its timeout or a database away an outage (503)."""
    try:
        return await handler(request)
    except StoreRejectedError as err:
        log.info("store refused a value of a query", path=request.path, error=str(err))
        raise Problem(
            422, "Unprocessable Content", "a value of the query is out of range", type_="bad-query"
        ) from err
    except StoreTimeoutError as err:
        log.warning("query ran out of time", path=request.path, error=str(err))
        raise Problem(
            503,
            "Service Unavailable",
            "the query did not finish within the statement timeout",
            type_="query-timeout",
            headers={"Retry-After": "5"},
        ) from err
    except StoreError as err:
        log.warning("store unavailable", path=request.path, error=str(err))
        raise Problem(
            503,
            "Service Unavailable",
            "the telemetry store is unavailable",
            type_="unavailable",
            headers={"Retry-After": "1"},
        ) from err


def create_app(
    deps: QueryDeps,
    verifier: TokenVerifier,
    readiness: Readiness,
    registry: CollectorRegistry,
    denylist: DenyList | None = None,
) -> web.Application:
    """The Telemetry HTTP application with ops routes."""
    app = service_app(
        "telemetry",
        readiness,
        registry,
        middlewares=[auth_middleware(verifier, denylist=denylist), store_errors],
        cors=CorsPolicy(deps.settings.http_cors_origins),
    )
    app[DEPS] = deps
    app.add_routes(
        [
            web.get("/v1/mowers/{mower_id}/state", get_state),
            web.get("/v1/mowers/{mower_id}/history", get_history),
            web.get("/v1/mowers/{mower_id}/track", get_track),
            web.get("/v1/mowers/{mower_id}/commands", get_commands),
            web.get("/v1/states", list_states),
        ]
    )
    add_openapi(app, openapi())
    return app
