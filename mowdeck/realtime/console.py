"""The operator console: its page and assets, its configuration and one-time sign-in codes."""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Protocol

import msgspec
import yarl
from aiohttp import web

from mowdeck.devices.errors import catalogue_json
from mowdeck.kit.http import Problem, json_response, read_json
from mowdeck.kit.ratelimit import RequestLimit
from mowdeck.realtime.settings import RealtimeSettings

__all__ = [
    "CONSOLE_PUBLIC_PATHS",
    "CodeExchange",
    "ConsoleConfig",
    "ExchangeRequest",
    "OneTimeCodes",
    "TokenReply",
    "console_config",
    "console_routes",
    "security_headers",
]

ASSETS = {
    "app.js": "text/javascript",
    "brands.js": "text/javascript",
    "sites.js": "text/javascript",
    "schedules.js": "text/javascript",
    "style.css": "text/css",
    "icon.svg": "image/svg+xml",
}
# Served at the root: a service worker's scope is at most its script's folder, and the
# console is the whole origin's page.
ROOT_ASSETS = {
    "sw.js": ("sw.js", "text/javascript"),
    "manifest.webmanifest": ("manifest.webmanifest", "application/manifest+json"),
}
# What a browser loads before it has a token; the realtime app passes these to
# ``auth_middleware(public_paths=...)`` with its own public paths.
# The vendors' error texts (mowdeck/devices/data), for an alarm's text in the console.
ERRORS_PATH = "/console/errors.json"
CONSOLE_PUBLIC_PATHS = (
    "/",
    "/console/config.json",
    ERRORS_PATH,
    "/console/exchange",
    *(f"/console/{name}" for name in ASSETS),
    *(f"/{name}" for name in ROOT_ASSETS),
)


class ConsoleConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Where the page finds the APIs it calls.

    ``notifications_url`` empty: no inbox. ``realtime_url`` empty: the page's own origin;
    None: no live stream, the page polls Telemetry instead.
    """

    fleet_url: str
    telemetry_url: str
    notifications_url: str = ""
    realtime_url: str | None = ""


def console_config(settings: RealtimeSettings) -> ConsoleConfig:
    """The page's configuration from ``MOWDECK_REALTIME_CONSOLE_*``; the stream is the
    page's own origin, the Realtime service serving it."""
    return ConsoleConfig(
        fleet_url=settings.realtime_console_fleet_url.rstrip("/"),
        telemetry_url=settings.realtime_console_telemetry_url.rstrip("/"),
        notifications_url=settings.realtime_console_notifications_url.rstrip("/"),
        realtime_url="",
    )


class CodeExchange(Protocol):
    """Turns a one-time code from a sign-in link into a bearer token."""

    def redeem(self, code: str) -> str | None:
        """The token ``code`` stands for, once; None for an unknown, used or expired code."""
        ...


class OneTimeCodes:
    """Single-use codes held in memory, each standing for a token for ``ttl_s`` seconds."""

    def __init__(self, *, ttl_s: float = 600.0, clock: Callable[[], float] = time.monotonic):
        self._ttl = ttl_s
        self._clock = clock
        self._codes: dict[str, tuple[str, float]] = {}

    def issue(self, token: str) -> str:
        """A new code for ``token``."""
        code = secrets.token_urlsafe(24)
        self._codes[code] = (token, self._clock() + self._ttl)
        return code

    def redeem(self, code: str) -> str | None:
        """The token of ``code``, which is used up by this call."""
        found = self._codes.pop(code, None)
        if found is None or self._clock() >= found[1]:
            return None
        return found[0]


class ExchangeRequest(msgspec.Struct, frozen=True):
    """Body of ``POST /console/exchange``: a one-time sign-in code."""

    code: str


class TokenReply(msgspec.Struct, frozen=True):
    """The access token a sign-in code was exchanged for."""

    token: str


_decode_exchange = msgspec.json.Decoder(ExchangeRequest)


def _origin(url: str) -> str | None:
    """``scheme://host[:port]`` of ``url``, None for an empty or relative one."""
    parsed = yarl.URL(url) if url else None
    if parsed is None or not parsed.is_absolute() or parsed.host is None:
        return None
    return str(parsed.origin())


def security_headers(config: ConsoleConfig) -> dict[str, str]:
    """The headers of every console response.

    The page runs only its own script and style (nothing inline, no ``eval``), talks only
    to its own origin and the APIs its configuration names, and may not be framed (no
    clickjacking of the emergency stop) nor leak its URL, which may carry a sign-in code,
    in a Referer.
    """
    apis = [config.fleet_url, config.telemetry_url, config.notifications_url]
    if config.realtime_url:
        apis.append(config.realtime_url)
    origins = sorted({o for o in map(_origin, apis) if o is not None})
    policy = "; ".join(
        [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data:",
            "manifest-src 'self'",
            "worker-src 'self'",
            " ".join(["connect-src 'self'", *origins]),
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ]
    )
    return {
        "Content-Security-Policy": policy,
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
        "X-Content-Type-Options": "nosniff",
    }


def _asset(name: str) -> bytes:
    return resources.files(__package__ or "mowdeck.realtime").joinpath("console", name).read_bytes()


def console_routes(
    config: ConsoleConfig,
    exchange: CodeExchange | None = None,
    *,
    limit: RequestLimit | None = None,
) -> list[web.RouteDef]:
    """``GET /`` (the page), its assets, ``/console/config.json`` and, with ``exchange``,
    ``POST /console/exchange`` (``{"code"}`` → ``{"token"}``, every attempt under
    ``limit``)."""
    # Read once: the files ship in the package and do not change while it runs.
    page = _asset("index.html")
    assets = {name: (_asset(name), kind) for name, kind in ASSETS.items()}
    no_cache = {"Cache-Control": "no-cache", **security_headers(config)}

    async def index(_: web.Request) -> web.Response:
        return web.Response(body=page, content_type="text/html", headers=no_cache)

    def asset(body: bytes, kind: str) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(_: web.Request) -> web.Response:
            return web.Response(body=body, content_type=kind, headers=no_cache)

        return handler

    async def config_json(_: web.Request) -> web.Response:
        response = json_response(config)
        response.headers.update(no_cache)
        return response

    async def redeem(request: web.Request) -> web.Response:
        assert exchange is not None
        try:
            code = _decode_exchange.decode(await read_json(request)).code
        except msgspec.DecodeError as err:
            raise Problem(400, "Bad Request", 'send {"code": "..."}', type_="invalid") from err
        token = exchange.redeem(code)
        if token is None:
            raise Problem(
                400,
                "Bad Request",
                "the sign-in code is unknown, used or expired (each is good once): "
                "paste a token instead",
                type_="invalid-code",
            )
        return json_response(TokenReply(token))

    # One route per asset: any other path under /console/ is the router's 404, before
    # authentication asks a signed-out browser for a token.
    routes = [
        web.get("/", index),
        web.get("/console/config.json", config_json),
        web.get(ERRORS_PATH, asset(catalogue_json(), "application/json")),
        *(web.get(f"/console/{name}", asset(*found)) for name, found in assets.items()),
        *(
            web.get(f"/{path}", asset(_asset(name), kind))
            for path, (name, kind) in ROOT_ASSETS.items()
        ),
    ]
    if exchange is not None:
        routes.append(web.post("/console/exchange", limit.guard(redeem) if limit else redeem))
    return routes
