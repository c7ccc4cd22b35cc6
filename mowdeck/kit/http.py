"""HTTP basics every service shares: health, readiness, metrics, request metrics and
problem+json errors."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

import msgspec
import structlog
from aiohttp import web
from aiohttp.typedefs import Middleware
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from mowdeck.errors import MowdeckError

__all__ = [
    "MAX_JSON_DEPTH",
    "PROBLEM_BASE",
    "PROBLEM_CONTENT_TYPE",
    "Handler",
    "Problem",
    "Readiness",
    "authz_unavailable",
    "decode_as_json_schema",
    "json_depth_exceeds",
    "json_response",
    "problem_middleware",
    "read_json",
    "request_metrics",
    "service_app",
    "task_alive",
    "with_ops_routes",
]

log = structlog.get_logger("mowdeck.http")
T = TypeVar("T")
PROBLEM_CONTENT_TYPE = "application/problem+json"
PROBLEM_BASE = "https://mowdeck.dev/problems/"


class Problem(MowdeckError):
    """An RFC 9457 problem answered to the client; ``type_`` is a short slug."""

    def __init__(
        self,
        status: int,
        title: str,
        detail: str | None = None,
        *,
        type_: str | None = None,
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail or title)
        self.status = status
        self.title = title
        self.detail = detail
        self.type_ = type_
        self.extra = extra or {}
        self.headers = headers or {}

    def body(self, instance: str) -> dict[str, Any]:
        """The problem document."""
        doc: dict[str, Any] = {
            "type": PROBLEM_BASE + self.type_ if self.type_ else "about:blank",
            "title": self.title,
            "status": self.status,
            "instance": instance,
        }
        if self.detail:
            doc["detail"] = self.detail
        doc.update(self.extra)
        return doc


def authz_unavailable() -> Problem:
    """The problem every service answers while authorization cannot be asked."""
    # A retry soon can help: the backend (OpenFGA, the tuple store) is usually back in
    # moments, and a cached answer may already serve the next request.
    return Problem(
        503,
        "Service Unavailable",
        "authorization is unavailable",
        type_="unavailable",
        headers={"Retry-After": "1"},
    )


def _problem_response(problem: Problem, instance: str) -> web.Response:
    return web.Response(
        status=problem.status,
        body=json.dumps(problem.body(instance)).encode(),
        content_type=PROBLEM_CONTENT_TYPE,
        headers=problem.headers,
    )


@web.middleware
async def problem_middleware(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Answer every error as ``application/problem+json``."""
    try:
        return await handler(request)
    except Problem as problem:
        return _problem_response(problem, request.path)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _problem_response(
            Problem(exc.status, exc.reason, type_=None, headers=_allow(exc)), request.path
        )
    except Exception:
        log.exception("unhandled error", path=request.path, method=request.method)
        return _problem_response(Problem(500, "Internal Server Error"), request.path)


def _allow(exc: web.HTTPException) -> dict[str, str]:
    allow = exc.headers.get("Allow")
    return {"Allow": allow} if allow else {}


def json_response(data: Any, status: int = 200) -> web.Response:
    """A JSON response from builtins or msgspec structs."""
    import msgspec  # noqa: PLC0415 - keep the module import light for the ops-only apps

    return web.Response(
        status=status, body=msgspec.json.encode(data), content_type="application/json"
    )


MAX_JSON_DEPTH = 64
"""How deeply a request body may nest arrays and objects: every document an API takes
nests a few levels; a decoder recursing a thousand levels fails with a RecursionError."""
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def json_depth_exceeds(body: bytes, limit: int) -> bool:
    """Whether ``body`` nests arrays and objects deeper than ``limit`` (strings skipped;
    a malformed body is the decoder's to refuse)."""
    brackets = _JSON_STRING.sub(b"", body).translate(None, _NOT_BRACKETS)
    if brackets.count(b"[") + brackets.count(b"{") <= limit:
        return False  # the common case: too few brackets to nest that deep
    depth = 0
    for byte in brackets:
        if byte in b"[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


async def read_json(
    request: web.Request, *, max_depth: int = MAX_JSON_DEPTH, also: tuple[str, ...] = ()
) -> bytes:
    """The raw request body, refusing a non-JSON content type, an empty body and a body
    nested deeper than ``max_depth``: the one reader of every route that takes JSON.
    ``also`` names more JSON media types the route takes (``application/geo+json``)."""
    if request.content_type not in ("application/json", "application/merge-patch+json", *also):
        raise Problem(
            415,
            "Unsupported Media Type",
            "send the body as application/json",
            type_="unsupported-media-type",
        )
    body = await request.read()
    if not body:
        raise Problem(400, "Bad Request", "the request body is empty", type_="empty-body")
    if json_depth_exceeds(body, max_depth):
        raise Problem(
            400,
            "Bad Request",
            f"the body nests arrays and objects deeper than {max_depth} levels",
            type_="too-deep",
        )
    return body


def _number(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() else value


# Untyped JSON with whole floats read as integers (``float_hook`` sees every float literal).
_schema_numbers = msgspec.json.Decoder(float_hook=_number)


def decode_as_json_schema(data: bytes | str, model: type[T]) -> T:
    """Decode ``data`` as ``model`` reading numbers as JSON Schema does: ``2.0`` is an
    integer. The documents describe bodies in JSON Schema, so a client may send either;
    errors are msgspec's (``ValidationError`` naming the path, ``DecodeError``)."""
    return msgspec.convert(_schema_numbers.decode(data), model)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5)
_MAX_SERIES = 10_000


def request_metrics(registry: CollectorRegistry, *, service: str) -> Middleware:
    """Counts and times every answer as ``mowdeck_<service>_http_requests_total{route,
    method,status}`` and ``mowdeck_<service>_http_request_duration_seconds{route}``.

    ``route`` is the matched route's pattern (``/v1/mowers/{mower_id}``), or
    ``unmatched``. Place it outermost, so problems are counted with their status.
    """
    requests = Counter(
        f"mowdeck_{service}_http_requests_total",
        "HTTP requests answered",
        ["route", "method", "status"],
        registry=registry,
    )
    duration = Histogram(
        f"mowdeck_{service}_http_request_duration_seconds",
        "Time to answer an HTTP request",
        ["route"],
        registry=registry,
        buckets=_DURATION_BUCKETS,
    )
    # Labelled children by (resource, method, status): a label lookup per request costs
    # more than the counting itself.
    children: dict[tuple[Any, str, int], tuple[Any, Any]] = {}

    def observe(request: web.Request, status: int, seconds: float) -> None:
        resource = request.match_info.route.resource
        key = (resource, request.method, status)
        found = children.get(key)
        if found is None:
            route = resource.canonical if resource is not None else "unmatched"
            found = (
                requests.labels(route, request.method, str(status)),
                duration.labels(route),
            )
            if len(children) < _MAX_SERIES:  # unmatched paths share one resource (None)
                children[key] = found
        found[0].inc()
        found[1].observe(seconds)

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.perf_counter()
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        finally:
            observe(request, status, time.perf_counter() - started)

    return middleware


class Readiness:
    """Readiness (503 while starting and while shutting down) and liveness.

    Parts a running service cannot do without (a consumer's delivery loop, a publisher
    task, a thread) are ``watch``ed: once one has died while the service runs,
    ``/healthz`` answers 503 naming it, so an orchestrator restarts the process instead of
    leaving it up and deaf.
    """

    def __init__(self) -> None:
        self.ready = False
        self.reason = "starting"
        # The streams the service waits for (the admin step has not created them yet).
        self.missing_streams: list[str] = []
        self._watched: dict[str, Callable[[], bool]] = {}

    def watch(self, name: str, alive: Callable[[], bool]) -> None:
        """Report ``name`` as failed on ``/healthz`` while ``alive()`` is False."""
        self._watched[name] = alive

    def failed(self) -> list[str]:
        """The watched parts that died while the service is running (not while stopping)."""
        if not self.ready:
            return []
        failed = []
        for name, alive in self._watched.items():
            try:
                ok = alive()
            except Exception:
                ok = False
            if not ok:
                failed.append(name)
        return failed

    def set_ready(self) -> None:
        """Accept traffic."""
        self.ready = True
        self.reason = "ready"
        self.missing_streams = []

    def set_not_ready(self, reason: str) -> None:
        """Refuse traffic with a reason."""
        self.ready = False
        self.reason = reason
        self.missing_streams = []

    def set_streams_missing(self, streams: list[str]) -> None:
        """Refuse traffic: the streams the service needs do not exist yet."""
        self.ready = False
        self.reason = "streams missing: " + ", ".join(streams)
        self.missing_streams = list(streams)

    def problem(self) -> Problem:
        """Why the service is not ready, as the problem ``/readyz`` answers."""
        if self.missing_streams:
            return Problem(
                503,
                "Service Unavailable",
                f"{self.reason}; create them with `mowdeck streams` (admin credentials)",
                type_="streams-missing",
                extra={"reason": self.reason, "missing_streams": self.missing_streams},
            )
        return Problem(
            503,
            "Service Unavailable",
            self.reason,
            type_="not-ready",
            extra={"reason": self.reason},
        )


READINESS = web.AppKey("readiness", Readiness)
REGISTRY = web.AppKey("registry", CollectorRegistry)


async def _health(request: web.Request) -> web.Response:
    failed = request.app[READINESS].failed()
    if failed:
        log.error("liveness failed", failed=failed)
        return json_response({"status": "failed", "failed": failed}, status=503)
    return json_response({"status": "ok"})


def task_alive(task: Callable[[], asyncio.Future[Any] | None]) -> Callable[[], bool]:
    """A ``watch`` check: the task ``task()`` returns exists and has not ended."""

    def alive() -> bool:
        current = task()
        return current is not None and not current.done()

    return alive


async def _ready(request: web.Request) -> web.Response:
    readiness = request.app[READINESS]
    if readiness.ready:
        return json_response({"status": readiness.reason})
    return _problem_response(readiness.problem(), request.path)


async def _metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[REGISTRY])
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def service_app(
    service: str,
    readiness: Readiness,
    registry: CollectorRegistry,
    *,
    middlewares: Sequence[Middleware] = (),
    cors: CorsInstaller | None = None,
) -> web.Application:
    """A service's HTTP application: every answer counted and timed (``request_metrics``),
    every error a problem (``problem_middleware``), then ``middlewares`` (authentication,
    the service's own error translation), CORS, and ``/healthz``, ``/readyz``,
    ``/metrics``."""
    app = web.Application(
        middlewares=[request_metrics(registry, service=service), problem_middleware, *middlewares]
    )
    if cors is not None:
        cors.install(app)
    with_ops_routes(app, readiness, registry)
    return app


class CorsInstaller(Protocol):
    """What installs a CORS policy on an application (``kit.cors.CorsPolicy``)."""

    def install(self, app: web.Application) -> None:
        """Answer preflights and mark answers to allowed origins."""
        ...


def with_ops_routes(
    app: web.Application, readiness: Readiness, registry: CollectorRegistry
) -> None:
    """Add ``/healthz``, ``/readyz`` and ``/metrics`` to ``app``."""
    app[READINESS] = readiness
    app[REGISTRY] = registry
    app.add_routes(
        [
            web.get("/healthz", _health),
            web.get("/readyz", _ready),
            web.get("/metrics", _metrics),
        ]
    )
