"""Cross-origin reads from browsers, limited to configured origins (``http_cors_origins``).

Headers are added in ``on_response_prepare``, so streamed responses (Server-Sent Events)
get them too; preflight ``OPTIONS`` requests are answered before authentication, which a
preflight never carries.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from aiohttp import web
from aiohttp.typedefs import Middleware

__all__ = ["CorsPolicy", "cors_middleware"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_ALLOW_HEADERS = "Authorization, Content-Type, Last-Event-ID"
_ALLOW_METHODS = "GET, POST, OPTIONS"
_MAX_AGE = "600"


class CorsPolicy:
    """The origins allowed (``*`` for any) and the check a WebSocket upgrade makes."""

    def __init__(self, origins: Iterable[str]) -> None:
        self.origins = frozenset(o.rstrip("/") for o in origins)

    def allows(self, origin: str) -> bool:
        """Whether a page from ``origin`` may read this API."""
        return "*" in self.origins or origin.rstrip("/") in self.origins

    def same_or_allowed(self, request: web.Request) -> bool:
        """No ``Origin`` (not a browser), the server's own, or an allowed one."""
        origin = request.headers.get("Origin")
        if origin is None:
            return True
        own = f"{request.scheme}://{request.host}"
        return origin.rstrip("/") == own or self.allows(origin)

    def install(self, app: web.Application) -> None:
        """Add the response headers to every answer of ``app``."""

        async def on_prepare(request: web.Request, response: web.StreamResponse) -> None:
            origin = request.headers.get("Origin")
            if origin is not None and self.allows(origin):
                response.headers["Access-Control-Allow-Origin"] = origin
                response.headers["Access-Control-Expose-Headers"] = "Retry-After"
                response.headers.add("Vary", "Origin")

        app.on_response_prepare.append(on_prepare)


def cors_middleware(policy: CorsPolicy) -> Middleware:
    """Answers preflights (204 when the origin is allowed, 403 otherwise)."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method != "OPTIONS" or "Access-Control-Request-Method" not in request.headers:
            return await handler(request)
        origin = request.headers.get("Origin", "")
        if not policy.allows(origin):
            return web.Response(status=403)
        return web.Response(
            status=204,
            headers={
                "Access-Control-Allow-Methods": _ALLOW_METHODS,
                "Access-Control-Allow-Headers": _ALLOW_HEADERS,
                "Access-Control-Max-Age": _MAX_AGE,
            },
        )

    return middleware
