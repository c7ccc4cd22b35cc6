"""The aiohttp middleware that turns a bearer token into the request's ``Principal``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from aiohttp import web
from aiohttp.typedefs import Middleware

from mowdeck.authn._denylist import DenyList
from mowdeck.authn._tokens import AuthenticationError, Principal, TokenVerifier
from mowdeck.kit.http import Problem

__all__ = ["PRINCIPAL", "auth_middleware", "principal"]

PRINCIPAL = web.RequestKey("principal", Principal)
PUBLIC_PATHS = ("/healthz", "/readyz", "/metrics", "/openapi.json")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _unauthenticated(err: AuthenticationError) -> Problem:
    # RFC 6750: no error code when no credentials came at all, invalid_token otherwise.
    challenge = 'Bearer realm="mowdeck"'
    if err.reason != "missing":
        description = err.detail.replace("\\", "").replace('"', "'")
        challenge += f', error="invalid_token", error_description="{description}"'
    return Problem(
        401,
        "Unauthorized",
        err.detail,
        type_="unauthenticated",
        extra={"reason": err.reason},
        headers={"WWW-Authenticate": challenge},
    )


def _bearer(request: web.Request) -> str:
    header = request.headers.get("Authorization", "")
    if not header:
        raise AuthenticationError("missing", "no bearer token was sent")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthenticationError("malformed", "the Authorization header is not 'Bearer <token>'")
    return token.strip()


def auth_middleware(
    verifier: TokenVerifier,
    *,
    denylist: DenyList | None = None,
    public_paths: Iterable[str] = PUBLIC_PATHS,
) -> Middleware:
    """A middleware that requires a valid bearer token on every route except ``public_paths``.

    A user on ``denylist`` is refused with reason ``disabled``, whatever the token says.
    Place it after ``problem_middleware`` so its 401 answers are problem documents.
    """
    public = frozenset(public_paths)

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        # An unknown path or method is answered 404/405 before any token is asked for:
        # a 401 would send a caller with a typo looking for a token problem.
        if request.path in public or request.match_info.http_exception is not None:
            return await handler(request)
        try:
            caller = verifier.verify(_bearer(request))
            if denylist is not None and denylist.is_denied(caller.user_id):
                raise AuthenticationError("disabled", "the user is disabled or deleted")
        except AuthenticationError as err:
            raise _unauthenticated(err) from err
        request[PRINCIPAL] = caller
        return await handler(request)

    return middleware


def principal(request: web.Request) -> Principal:
    """The verified caller of ``request`` (set by ``auth_middleware``)."""
    try:
        return request[PRINCIPAL]
    except KeyError:
        raise RuntimeError("auth_middleware did not run for this request") from None
