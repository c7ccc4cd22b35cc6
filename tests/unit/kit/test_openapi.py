"""The kit's OpenAPI machinery: documents from models, and routes held to their operations."""

from __future__ import annotations

import uuid
from typing import Annotated

import msgspec
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from openapi_spec_validator import validate

from mowdeck.kit.openapi import (
    Body,
    Operation,
    Param,
    UndescribedRoutesError,
    add_openapi,
    document,
    route_mismatch,
)


class Thing(msgspec.Struct, frozen=True):
    """A thing."""

    id: uuid.UUID
    size: Annotated[int, msgspec.Meta(ge=1)]


_THING = Thing(uuid.UUID(int=1), 3)
_GET = Operation(
    "GET",
    "/things/{id}",
    "getThing",
    "A thing.",
    {200: Body(Thing, _THING)},
    params=(Param("id", "path", uuid.UUID, "Its id."),),
    problems=(404,),
)
_PUT = Operation(
    "PUT",
    "/things/{id}",
    "putThing",
    "Store a thing.",
    {204: "Stored."},
    params=_GET.params,
    body=Body(Thing, _THING),
)


async def _handler(_: web.Request) -> web.Response:
    return web.Response(status=204)


def _app(*paths: tuple[str, str]) -> web.Application:
    app = web.Application()
    app.add_routes([web.route(method, path, _handler) for method, path in paths])
    return app


def test_a_document_holds_models_params_examples_and_problems() -> None:
    doc = document("Things", "1", [_GET, _PUT])
    validate(doc)
    get = doc["paths"]["/things/{id}"]["get"]
    assert get["responses"]["200"]["content"]["application/json"]["example"] == {
        "id": str(uuid.UUID(int=1)),
        "size": 3,
    }
    assert doc["components"]["schemas"]["Thing"]["properties"]["size"]["minimum"] == 1
    assert get["parameters"][0] == {
        "name": "id",
        "in": "path",
        "required": True,
        "description": "Its id.",
        "schema": {"type": "string", "format": "uuid"},
    }
    assert set(get["responses"]) == {"200", "401", "404"}
    put = doc["paths"]["/things/{id}"]["put"]
    assert set(put["responses"]) == {"204", "400", "401", "413", "415"}
    assert "/healthz" in doc["paths"]
    assert doc["paths"]["/healthz"]["get"]["security"] == []


def test_route_mismatch_names_both_sides() -> None:
    doc = document("Things", "1", [_GET, _PUT], ops_operations=[])
    app = _app(("GET", "/things/{id}"), ("POST", "/things"))
    assert route_mismatch(app, doc) == (["POST /things"], ["PUT /things/{id}"])
    full = _app(("GET", "/things/{id}"), ("PUT", "/things/{id}"))
    assert route_mismatch(full, doc) == ([], [])


async def test_an_application_with_an_undescribed_route_does_not_start() -> None:
    doc = document("Things", "1", [_GET], ops_operations=[])
    app = _app(("GET", "/things/{id}"), ("DELETE", "/things/{id}"))
    add_openapi(app, doc)
    with pytest.raises(UndescribedRoutesError, match=r"DELETE /things/\{id\}"):
        await TestServer(app).start_server()


async def test_the_document_is_served() -> None:
    doc = document("Things", "1", [_GET])
    app = _app(
        ("GET", "/things/{id}"), ("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/metrics")
    )
    add_openapi(app, doc)
    async with TestClient(TestServer(app)) as client:
        response = await client.get("/openapi.json")
        assert response.status == 200
        assert await response.json() == doc
