"""OpenAPI 3.1 documents of the HTTP APIs, from the msgspec models the handlers use.

Each service lists its operations beside its aiohttp routes (an ``Operation`` per route:
parameters, body, answers with their models and an example each). ``document`` renders
them, schemas made by ``msgspec.json.schema_components``; ``add_openapi`` serves the
result at ``GET /openapi.json``; ``route_mismatch`` names a route with no operation and an
operation with no route, which the tests hold at none.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec
from aiohttp import web

from mowdeck.errors import MowdeckError

__all__ = [
    "OPENAPI_PATH",
    "OPS_OPERATIONS",
    "Body",
    "Link",
    "OneOf",
    "Operation",
    "Param",
    "ProblemDocument",
    "UndescribedRoutesError",
    "add_openapi",
    "document",
    "route_mismatch",
]

OPENAPI_PATH = "/openapi.json"


class ProblemDocument(msgspec.Struct, frozen=True, kw_only=True):
    """An RFC 9457 problem: every error answer; ``field`` names the input at fault."""

    type: str
    title: str
    status: int
    instance: str
    detail: str | None = None
    field: str | None = None


_PROBLEM_EXAMPLE = ProblemDocument(
    type="https://mowdeck.dev/problems/bad-request",
    title="Bad Request",
    status=400,
    instance="/v1/example",
    detail="`limit` must be a whole number from 1 to 1000",
    field="limit",
)
_REASONS = {
    400: "The request is malformed; ``field`` names the input at fault.",
    401: "No valid bearer token.",
    403: "The caller may not do this.",
    404: "No such resource visible to the caller (an id that does not parse included).",
    409: "The request conflicts with the current state.",
    413: "The body is too large.",
    415: "The body is not JSON.",
    422: "A value is out of range or refused; ``field`` names it.",
    429: "Too many requests; ``Retry-After`` says when to try again.",
    503: "A dependency is unavailable; ``Retry-After`` says when to try again.",
}


class OneOf(tuple[Any, ...]):
    """A body that is one of several models (``oneOf`` in the document)."""


@dataclass(frozen=True)
class Body:
    """A request or response body: its model (any type msgspec describes) and an example."""

    model: Any
    example: Any
    description: str = ""
    media_type: str = "application/json"
    # A rule across fields the model's schema cannot state (JSON Schema, with the model's).
    also: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Param:
    """A query, path or header parameter, its type (msgspec constraints included)."""

    name: str
    where: Literal["query", "path", "header"]
    model: Any
    description: str
    required: bool = False


@dataclass(frozen=True)
class Link:
    """An OpenAPI link: what an answer of ``status`` lets a client do next, with which
    parameters (runtime expressions such as ``$response.body#/id``)."""

    status: int
    name: str
    operation_id: str
    parameters: Mapping[str, str]


@dataclass(frozen=True)
class Operation:
    """One route: what it does, what it takes, and every answer it gives."""

    method: str
    path: str
    operation_id: str
    summary: str
    responses: Mapping[int, Body | str]
    params: Sequence[Param] = ()
    body: Body | None = None
    problems: Iterable[int] = ()
    public: bool = False
    tags: Sequence[str] = ()
    description: str = ""
    streaming: bool = field(default=False)
    links: Sequence[Link] = ()


def _text(description: str) -> Body:
    return Body(str, "ok", description, media_type="text/plain")


class Probe(msgspec.Struct, frozen=True):
    """The status of a health or readiness probe."""

    status: str
    failed: list[str] | None = None


OPS_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "GET",
        "/healthz",
        "health",
        "Liveness: 503 naming the parts that failed.",
        {
            200: Body(Probe, Probe("ok"), "Alive."),
            503: Body(Probe, Probe("failed", ["x"]), "Not alive: the parts that failed."),
        },
        public=True,
        tags=("operations",),
    ),
    Operation(
        "GET",
        "/readyz",
        "ready",
        "Readiness: 503 with the reason while the service cannot serve.",
        {200: Body(Probe, Probe("ready"), "Ready.")},
        problems=(503,),
        public=True,
        tags=("operations",),
    ),
    Operation(
        "GET",
        "/metrics",
        "metrics",
        "Prometheus metrics in the text exposition format.",
        {200: _text("The metrics.")},
        public=True,
        tags=("operations",),
    ),
    Operation(
        "GET",
        OPENAPI_PATH,
        "openapi",
        "This document.",
        {200: Body(dict[str, Any], {"openapi": "3.1.0"}, "The OpenAPI document.")},
        public=True,
        tags=("operations",),
    ),
)


def _example(value: Any) -> Any:
    # Through JSON, not ``to_builtins``: a ``msgspec.Raw`` field is JSON already.
    return json.loads(msgspec.json.encode(value))


def _content(body: Body, schema: dict[str, Any]) -> dict[str, Any]:
    if body.also is not None:
        schema = {"allOf": [schema, dict(body.also)]}
    return {body.media_type: {"schema": schema, "example": _example(body.example)}}


def document(
    title: str,
    version: str,
    operations: Sequence[Operation],
    description: str = "",
    *,
    ops_operations: Sequence[Operation] = OPS_OPERATIONS,
) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``operations`` and the ops routes (``ops_operations``)."""
    ops = [*operations, *ops_operations]
    models: list[Any] = [ProblemDocument]
    for op in ops:
        models += [p.model for p in op.params]
        models += [b.model for b in op.responses.values() if isinstance(b, Body)]
        if op.body is not None:
            models.append(op.body.model)
    plain = [m for m in models if not isinstance(m, OneOf)]
    plain += [one for m in models if isinstance(m, OneOf) for one in m]
    schemas, components = msgspec.json.schema_components(
        plain, ref_template="#/components/schemas/{name}"
    )
    schema_of = dict(zip(map(_key, plain), schemas, strict=True))
    for m in models:
        if isinstance(m, OneOf):
            schema_of[_key(m)] = {"oneOf": [schema_of[_key(one)] for one in m]}
    paths: dict[str, dict[str, Any]] = {}
    for op in ops:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op, schema_of)
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version, "description": description},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "bearerFormat": "JWT",
                    "description": "A Mowdeck access token (docs/auth.md).",
                }
            },
        },
        "security": [{"bearer": []}],
    }


def _key(model: Any) -> str:
    return repr(model)


def _operation(op: Operation, schema_of: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"operationId": op.operation_id, "summary": op.summary}
    if op.description:
        out["description"] = op.description
    if op.tags:
        out["tags"] = list(op.tags)
    if op.public:
        out["security"] = []
    if op.params:
        out["parameters"] = [
            {
                "name": p.name,
                "in": p.where,
                "required": p.required or p.where == "path",
                "description": p.description,
                "schema": schema_of[_key(p.model)],
            }
            for p in op.params
        ]
    if op.body is not None:
        out["requestBody"] = {
            "required": True,
            "description": op.body.description,
            "content": _content(op.body, schema_of[_key(op.body.model)]),
        }
    responses: dict[str, Any] = {}
    for status, answer in sorted(op.responses.items()):
        if isinstance(answer, str):
            responses[str(status)] = {"description": answer}
        else:
            responses[str(status)] = {
                "description": answer.description or "OK",
                "content": _content(answer, schema_of[_key(answer.model)]),
            }
    for link in op.links:
        responses[str(link.status)].setdefault("links", {})[link.name] = {
            "operationId": link.operation_id,
            "parameters": dict(link.parameters),
        }
    problems = set(op.problems) | ({400, 413, 415} if op.body is not None else set())
    if not op.public:
        problems |= {401}
    for status in sorted(problems - set(op.responses)):
        example = msgspec.structs.replace(_PROBLEM_EXAMPLE, status=status, instance=op.path)
        responses[str(status)] = {
            "description": _REASONS.get(status, "A problem."),
            "content": {
                "application/problem+json": {
                    "schema": schema_of[_key(ProblemDocument)],
                    "example": _example(example),
                }
            },
        }
    out["responses"] = responses
    return out


class UndescribedRoutesError(MowdeckError):
    """An application's routes and its OpenAPI document disagree."""


def add_openapi(app: web.Application, doc: Mapping[str, Any]) -> None:
    """Serve ``doc`` at ``GET /openapi.json`` (no token needed).

    The application refuses to start while a route has no operation in ``doc`` or an
    operation no route: every test that starts a service holds the document complete.
    """
    body = json.dumps(doc, indent=2, sort_keys=True).encode()

    async def serve(_: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    async def check(app: web.Application) -> None:
        undescribed, stale = route_mismatch(app, doc)
        if undescribed or stale:
            raise UndescribedRoutesError(
                f"{doc['info']['title']}: routes without an operation {undescribed}, "
                f"operations without a route {stale}"
            )

    app.add_routes([web.get(OPENAPI_PATH, serve)])
    app.on_startup.append(check)


def route_mismatch(app: web.Application, doc: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """Routes of ``app`` no operation of ``doc`` describes, and operations with no route."""
    routes = set()
    for route in app.router.routes():
        info = route.resource.get_info() if route.resource is not None else {}
        path = info.get("formatter") or info.get("path")
        if path is None or route.method in ("HEAD", "OPTIONS", "*"):
            continue
        routes.add(f"{route.method} {path}")
    described = {
        f"{method.upper()} {path}" for path, item in doc["paths"].items() for method in item
    }
    return sorted(routes - described), sorted(described - routes)
