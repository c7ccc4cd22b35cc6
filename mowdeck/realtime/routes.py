"""The HTTP API: ``GET /v1/stream`` (SSE), ``GET /v1/ws``, ``POST /v1/stream/tickets`` and
the operator console at ``/``."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
import uuid
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CollectorRegistry

from mowdeck.authn import (
    AuthenticationError,
    DenyList,
    Principal,
    TokenVerifier,
    auth_middleware,
    principal,
)
from mowdeck.authz import AuthzUnavailableError
from mowdeck.kit.cors import CorsPolicy
from mowdeck.kit.http import (
    Problem,
    Readiness,
    authz_unavailable,
    json_response,
    service_app,
)
from mowdeck.kit.openapi import OPS_OPERATIONS, add_openapi
from mowdeck.realtime.access import Access
from mowdeck.realtime.buffer import SendBuffer
from mowdeck.realtime.client import Client, Transport
from mowdeck.realtime.console import (
    CONSOLE_PUBLIC_PATHS,
    CodeExchange,
    console_config,
    console_routes,
)
from mowdeck.realtime.errors import TicketError
from mowdeck.realtime.frames import EVENT_TYPES
from mowdeck.realtime.limits import RealtimeLimits
from mowdeck.realtime.openapi import openapi
from mowdeck.realtime.positions import parse_position
from mowdeck.realtime.session import Streams
from mowdeck.realtime.settings import RealtimeSettings
from mowdeck.realtime.sinks import SseSink, WsSink
from mowdeck.realtime.tickets import TicketReply, Tickets

__all__ = ["RealtimeDeps", "create_app"]

STREAM_PATHS = ("/v1/stream", "/v1/ws")
OPS_PATHS = tuple(op.path for op in OPS_OPERATIONS)
# Query parameters that would carry a credential in a URL: refused, never read.
_CREDENTIAL_PARAMS = frozenset({"token", "access_token", "bearer", "jwt", "authorization"})


@dataclass(frozen=True)
class RealtimeDeps:
    """What the handlers need."""

    streams: Streams
    access: Access
    tickets: Tickets
    verifier: TokenVerifier
    settings: RealtimeSettings
    cors: CorsPolicy
    denylist: DenyList


DEPS = web.AppKey("realtime_deps", RealtimeDeps)


def _bad(detail: str, type_: str = "bad-query", field: str | None = None) -> Problem:
    return Problem(
        400, "Bad Request", detail, type_=type_, extra={"field": field} if field else None
    )


def _unauthenticated(reason: str, detail: str) -> Problem:
    return Problem(
        401,
        "Unauthorized",
        detail,
        type_="unauthenticated",
        extra={"reason": reason},
        headers={"WWW-Authenticate": 'Bearer realm="mowdeck"'},
    )


def _looks_like_token(value: str) -> bool:
    return value.count(".") == 2 or value.startswith("eyJ")


async def _caller(request: web.Request, deps: RealtimeDeps) -> Principal:
    """The verified caller of a stream, from ``?ticket=`` or the bearer token."""
    query = request.query
    if _CREDENTIAL_PARAMS & {k.lower() for k in query}:
        raise _bad("tokens never travel in a URL: send a ticket", type_="token-in-url")
    ticket = query.get("ticket")
    if ticket is not None:
        if _looks_like_token(ticket):
            raise _bad(
                "a token is not a ticket: POST /v1/stream/tickets",
                type_="token-in-url",
                field="ticket",
            )
        try:
            return await deps.tickets.redeem(ticket, time.time())
        except TicketError as err:
            raise _unauthenticated(f"ticket-{err.reason}", err.detail) from err
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if not header:
        raise _unauthenticated("missing", "send a bearer token or a ?ticket=")
    if scheme.lower() != "bearer" or not token.strip():
        raise _unauthenticated("malformed", "the Authorization header is not 'Bearer <token>'")
    try:
        return deps.verifier.verify(token.strip())
    except AuthenticationError as err:
        raise _unauthenticated(err.reason, err.detail) from err


def _types(request: web.Request) -> frozenset[str]:
    text = request.query.get("types")
    if text is None:
        return EVENT_TYPES
    chosen = frozenset(t.strip() for t in text.split(",") if t.strip())
    unknown = chosen - EVENT_TYPES
    if unknown or not chosen:
        raise _bad(f"`types` takes {', '.join(sorted(EVENT_TYPES))}", field="types")
    return chosen


def _requested(request: web.Request, visible: frozenset[uuid.UUID]) -> frozenset[uuid.UUID] | None:
    text = request.query.get("mowers")
    if text is None:
        return None
    wanted: set[uuid.UUID] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            mower_id = uuid.UUID(part)
        except ValueError:
            mower_id = None
        if mower_id is None or mower_id not in visible:
            raise Problem(404, "Not Found", f"no mower {part} is visible to you", type_="not-found")
        wanted.add(mower_id)
    return frozenset(wanted)


async def _open(request: web.Request, transport: Transport) -> tuple[RealtimeDeps, Client, bool]:
    """Everything a stream checks before it answers: the caller, limits, filters."""
    deps = request.app[DEPS]
    caller = await _caller(request, deps)
    hub, s = deps.streams.hub, deps.settings
    # After a ticket's redemption too: a ticket issued before the denial opens nothing.
    if deps.denylist.is_denied(caller.user_id):
        deps.streams.metrics.refused.labels("blocked").inc()
        # As auth_middleware answers a denied user on every other route and service.
        raise _unauthenticated("disabled", "the user is disabled or deleted")
    if hub.connections_of(caller.user_id) >= s.realtime_max_connections_per_user:
        deps.streams.metrics.refused.labels("limit").inc()
        raise Problem(
            429,
            "Too Many Requests",
            f"at most {s.realtime_max_connections_per_user} streams per user",
            type_="too-many-streams",
            headers={"Retry-After": "5"},
        )
    types = _types(request)
    try:
        visible = await deps.access.visible(caller.user_id, caller.account_id)
    except AuthzUnavailableError as err:
        raise authz_unavailable() from err
    requested = _requested(request, visible)
    since_text = request.headers.get("Last-Event-ID") or request.query.get("since")
    client = Client(
        user_id=caller.user_id,
        account_id=caller.account_id,
        transport=transport,
        types=types,
        requested=requested,
        visible=visible,
        buffer=SendBuffer(max_events=s.realtime_buffer_events, max_lag=s.realtime_max_lag_seconds),
    )
    return deps, client, since_text is not None


def _since(request: web.Request) -> str | None:
    return request.headers.get("Last-Event-ID") or request.query.get("since")


WRITE_BUFFER_BYTES = 16 * 1024
"""Bytes a stream's transport holds before a write waits: small, so that a slow client's
backlog stays in its conflating buffer rather than in a socket buffer (and memory)."""
SOCKET_SEND_BUFFER_BYTES = 64 * 1024
"""The kernel's send buffer of a stream's socket (Linux doubles it). Left to autotuning
it grows to megabytes on a fast link, all of it events a slow reader has not read and
that can no longer be conflated; 64 KiB still carries hundreds of events a round trip."""


def _limit_write_buffer(request: web.Request) -> None:
    transport = request.transport
    if transport is None:
        return
    transport.set_write_buffer_limits(high=WRITE_BUFFER_BYTES)
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_SEND_BUFFER_BYTES)


async def get_stream(request: web.Request) -> web.StreamResponse:
    """``GET /v1/stream``: Server-Sent Events."""
    deps, client, resuming = await _open(request, "sse")
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache, no-store",
            "X-Accel-Buffering": "no",  # proxies must not hold events back
        }
    )
    await response.prepare(request)
    _limit_write_buffer(request)
    text = _since(request)
    since = None if text is None else parse_position(text)
    sink = SseSink(response, deps.streams.hub.current_id())
    await deps.streams.serve(client, sink, since=since, resuming=resuming)
    return response


def _not_websocket() -> Problem:
    return Problem(
        400,
        "Bad Request",
        "GET /v1/ws takes a WebSocket upgrade; use /v1/stream for Server-Sent Events",
        type_="not-websocket",
    )


async def get_ws(request: web.Request) -> web.StreamResponse:
    """``GET /v1/ws``: the same events as WebSocket text messages."""
    deps = request.app[DEPS]
    if not deps.cors.same_or_allowed(request):
        raise Problem(403, "Forbidden", "this origin may not open a stream", type_="origin")
    ws = web.WebSocketResponse(max_msg_size=4096)
    upgrade = ws.can_prepare(request).ok
    if not upgrade and "ticket" in request.query:
        # Before the ticket is redeemed: a request that cannot become a WebSocket must not
        # use up its single-use ticket.
        raise _not_websocket()
    deps, client, resuming = await _open(request, "ws")
    if not upgrade:
        raise _not_websocket()
    await ws.prepare(request)
    _limit_write_buffer(request)
    text = _since(request)
    since = None if text is None else parse_position(text)

    async def read() -> None:
        # Nothing is expected from the client; reading answers pings and sees the close.
        async for _message in ws:
            pass
        client.close("disconnected: closed by the client")

    reader = asyncio.get_running_loop().create_task(read())
    try:
        await deps.streams.serve(
            client, WsSink(ws, deps.streams.hub.current_id()), since=since, resuming=resuming
        )
    finally:
        reader.cancel()
        with contextlib.suppress(BaseException):
            await reader
    return ws


async def post_ticket(request: web.Request) -> web.Response:
    """``POST /v1/stream/tickets``: a single-use ticket for one stream."""
    deps = request.app[DEPS]
    caller = principal(request)  # auth_middleware refused a denied user
    ticket = await deps.tickets.issue(caller, time.time())
    ttl = deps.settings.realtime_ticket_ttl_seconds
    return json_response(TicketReply(ticket=ticket, expires_in=ttl), status=201)


def create_app(
    deps: RealtimeDeps,
    verifier: TokenVerifier,
    readiness: Readiness,
    registry: CollectorRegistry,
    *,
    limits: RealtimeLimits,
    exchange: CodeExchange | None = None,
) -> web.Application:
    """The Realtime HTTP application: the streams, the operator console at ``/`` (with
    ``POST /console/exchange`` for one-time sign-in codes when given an ``exchange``) and
    ops routes; tickets and sign-ins under ``limits``."""
    # The streams check their callers themselves; a signed-out browser loads the console.
    public = (*OPS_PATHS, *STREAM_PATHS, *CONSOLE_PUBLIC_PATHS)
    app = service_app(
        "realtime",
        readiness,
        registry,
        middlewares=[auth_middleware(verifier, denylist=deps.denylist, public_paths=public)],
        cors=deps.cors,
    )
    app[DEPS] = deps
    app.add_routes(
        [
            web.get("/v1/stream", get_stream),
            web.get("/v1/ws", get_ws),
            web.post("/v1/stream/tickets", limits.tickets.guard(post_ticket)),
            *console_routes(console_config(deps.settings), exchange, limit=limits.sign_ins),
        ]
    )
    add_openapi(app, openapi(exchange=exchange is not None))
    return app
