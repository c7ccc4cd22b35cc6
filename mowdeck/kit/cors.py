"""Cross-origin reads from browsers, limited to configured origins (``http_cors_origins``).

The one CORS mechanism of every service: ``CorsPolicy(origins).install(app)``. Headers
are added in ``on_response_prepare``, so every answer gets them, streamed ones (Server-Sent
Events) and errors too; preflight ``OPTIONS`` requests are answered by the app's first
middleware, before metrics and authentication (a preflight never carries a token): 204
with the allowed methods and headers for an allowed origin, 403 for any other.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from aiohttp import web

__all__ = ["CorsPolicy"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_ALLOW_HEADERS = "Authorization, Content-Type, Last-Event-ID"
_ALLOW_METHODS = "GET, POST, PUT, PATCH, DELETE, OPTIONS"
# What a page may read beyond the simple response headers: when to retry, where a new
# resource is.
_EXPOSE_HEADERS = "Location, Retry-After"
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
        """Answer preflights first in ``app`` and add the headers to every answer of it."""
        app.middlewares.insert(0, self._preflight)
        app.on_response_prepare.append(self._on_prepare)

    @web.middleware
    async def _preflight(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method != "OPTIONS" or "Access-Control-Request-Method" not in request.headers:
            return await handler(request)
        if not self.allows(request.headers.get("Origin", "")):
            return web.Response(status=403)
        return web.Response(
            status=204,
            headers={
                "Access-Control-Allow-Methods": _ALLOW_METHODS,
                "Access-Control-Allow-Headers": _ALLOW_HEADERS,
                "Access-Control-Max-Age": _MAX_AGE,
            },
        )

    async def _on_prepare(self, request: web.Request, response: web.StreamResponse) -> None:
        origin = request.headers.get("Origin")
        if origin is None:
            return
        # Answers differ by origin: a cache must not hand one origin's to another.
        response.headers.add("Vary", "Origin")
        if self.allows(origin):
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Access-Control-Expose-Headers"] = _EXPOSE_HEADERS
