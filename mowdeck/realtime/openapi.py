"""The operations of Realtime's API (``realtime/routes.py``, ``realtime/console.py``), for
its OpenAPI document. The streams are described, though no generated client speaks them:
events as Server-Sent Events or WebSocket text messages (docs/realtime.md)."""

from __future__ import annotations

import uuid
from typing import Any

from mowdeck.kit.openapi import Body, Operation, Param, document
from mowdeck.realtime.console import (
    ASSETS,
    ERRORS_PATH,
    ROOT_ASSETS,
    ConsoleConfig,
    ExchangeRequest,
    TokenReply,
)
from mowdeck.realtime.tickets import TicketReply

__all__ = ["openapi"]

_STREAM_PARAMS = (
    Param("ticket", "query", str, "A ticket from `POST /v1/stream/tickets` (or a bearer token)."),
    Param(
        "types", "query", str, "Comma-separated event types: state, command, link, notification."
    ),
    Param("mowers", "query", str, "Comma-separated mower ids, each visible to the caller."),
    Param("since", "query", str, "Resume after this event id (as `Last-Event-ID`)."),
    Param("Last-Event-ID", "header", str, "Resume after this event id."),
)
_EVENT = "id: 1-0\nevent: state\ndata: {...}\n\n"
_CONSOLE = ("console",)


def _operations(exchange: bool) -> tuple[Operation, ...]:
    ops = [
        Operation(
            "GET",
            "/v1/stream",
            "stream",
            "The caller's events as Server-Sent Events.",
            {200: Body(str, _EVENT, "The event stream.", media_type="text/event-stream")},
            params=_STREAM_PARAMS,
            problems=(400, 401, 404, 429, 503),
            public=True,
            tags=("streams",),
            streaming=True,
        ),
        Operation(
            "GET",
            "/v1/ws",
            "websocket",
            "The caller's events as WebSocket text messages (an upgrade).",
            {101: "Switching to the WebSocket protocol."},
            params=_STREAM_PARAMS,
            problems=(400, 401, 403, 404, 429, 503),
            public=True,
            tags=("streams",),
            streaming=True,
        ),
        Operation(
            "POST",
            "/v1/stream/tickets",
            "issueTicket",
            "A single-use ticket that opens one stream without a token in its URL.",
            {201: Body(TicketReply, TicketReply(ticket="t_4f9c2a", expires_in=30.0), "Issued.")},
            problems=(429, 503),
            tags=("streams",),
        ),
        Operation(
            "GET",
            "/",
            "console",
            "The operator console.",
            {200: Body(str, "<!doctype html>", "The page.", media_type="text/html")},
            public=True,
            tags=_CONSOLE,
        ),
        Operation(
            "GET",
            "/console/config.json",
            "consoleConfig",
            "Where the console finds the APIs it calls.",
            {
                200: Body(
                    ConsoleConfig,
                    ConsoleConfig(
                        fleet_url="http://127.0.0.1:8081", telemetry_url="http://127.0.0.1:8082"
                    ),
                )
            },
            public=True,
            tags=_CONSOLE,
        ),
        Operation(
            "GET",
            ERRORS_PATH,
            "consoleErrorTexts",
            "The vendors' numbered error codes with their English and German texts "
            "(Automower Connect), for an alarm's text.",
            {
                200: Body(
                    dict[str, Any],
                    {"source": "...", "codes": {"24": {"en": "Cutting system blocked"}}},
                    "The catalogue.",
                    media_type="application/json",
                )
            },
            public=True,
            tags=_CONSOLE,
        ),
        *(
            Operation(
                "GET",
                f"/console/{name}",
                f"consoleAsset_{name.replace('.', '_')}",
                f"The console's {name}.",
                {200: Body(str, "", f"The {name}.", media_type=kind)},
                public=True,
                tags=_CONSOLE,
            )
            for name, kind in ASSETS.items()
        ),
        *(
            Operation(
                "GET",
                f"/{path}",
                f"consoleRoot_{path.replace('.', '_')}",
                f"The console's {path} (served at the root: the service worker's scope is /).",
                {
                    200: Body(
                        dict[str, Any] if kind.endswith("json") else str,
                        {} if kind.endswith("json") else "",
                        f"The {path}.",
                        media_type=kind,
                    )
                },
                public=True,
                tags=_CONSOLE,
            )
            for path, (_, kind) in ROOT_ASSETS.items()
        ),
    ]
    if exchange:
        ops.append(
            Operation(
                "POST",
                "/console/exchange",
                "exchangeCode",
                "Exchange a one-time sign-in code for an access token.",
                {200: Body(TokenReply, TokenReply("eyJ..."))},
                body=Body(ExchangeRequest, ExchangeRequest(str(uuid.UUID(int=7)))),
                problems=(429,),
                public=True,
                tags=_CONSOLE,
            )
        )
    return tuple(ops)


def openapi(version: str = "1", *, exchange: bool = True) -> dict[str, Any]:
    """Realtime's OpenAPI document; ``exchange`` when the console exchanges sign-in codes."""
    return document(
        "Mowdeck Realtime",
        version,
        _operations(exchange),
        "Live events of the caller's mowers as streams, and the operator console.",
    )
