"""The APIs' OpenAPI documents: exported, current, valid, and complete in what they say."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openapi_spec_validator import validate

from mowdeck.commands.contracts import (
    DOCUMENTS,
    OPENAPI_DIR,
    render_openapi,
    stale_openapi,
    write_openapi,
)

_METHODS = {"get", "put", "post", "delete", "patch"}


def _operations(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{method.upper()} {path}", op)
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if method in _METHODS
    ]


def test_the_exported_documents_are_current() -> None:
    stale = stale_openapi()
    assert not stale, f"run `mowdeck contracts export`; stale: {stale}"


def test_a_changed_document_is_stale(tmp_path: Path) -> None:
    folder = tmp_path / "openapi"
    write_openapi(folder)
    assert stale_openapi(folder) == []
    (folder / "fleet.json").write_text("{}")
    (folder / "realtime.json").unlink()
    (tmp_path / "api" / "telemetry.md").write_text("# old")
    assert stale_openapi(folder) == ["../api/telemetry.md", "fleet.json", "realtime.json"]


def test_the_reference_page_lists_every_operation_and_schema() -> None:
    doc = json.loads(render_openapi()["fleet.json"])
    page = render_openapi()["../api/fleet.md"]
    for route, _ in _operations(doc):
        assert f"### `{route}`" in page
    for name in doc["components"]["schemas"]:
        assert f"### {name}\n" in page


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_each_document_is_valid_openapi_3_1(name: str) -> None:
    doc = json.loads((OPENAPI_DIR / f"{name}.json").read_text())
    assert doc["openapi"] == "3.1.0"
    validate(doc)


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_every_body_has_an_example_and_every_error_is_a_problem(name: str) -> None:
    doc = json.loads(render_openapi()[f"{name}.json"])
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    for route, op in _operations(doc):
        bodies = [op["requestBody"]] if "requestBody" in op else []
        bodies += [r for r in op["responses"].values() if "content" in r]
        for body in bodies:
            for media, content in body["content"].items():
                assert "example" in content, f"{route} {media}: no example"
        for status, answer in op["responses"].items():
            # A failed liveness probe answers its status document, as the ops tools expect.
            if int(status) >= 400 and route != "GET /healthz":
                assert "application/problem+json" in answer["content"], f"{route} {status}"
        secured = op.get("security", doc.get("security")) != []
        if secured:
            assert "401" in op["responses"], route
