"""A readable API reference in Markdown, rendered from an OpenAPI document of ``kit.openapi``.

``mowdeck contracts export`` writes one page a service into ``docs/api/``; like the
documents, a test fails while a committed page is stale.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["markdown"]

_METHODS = ("get", "post", "put", "patch", "delete")


def _array(schema: Mapping[str, Any]) -> str:
    if "prefixItems" in schema:  # a tuple, e.g. a GeoJSON position
        return f"[{', '.join(_type(s) for s in schema['prefixItems'])}]"
    return f"array of {_type(schema.get('items', {}))}"


def _type(schema: Mapping[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return " or ".join(_type(s) for s in schema[key])
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{schema['const']}`"
    kind = schema.get("type", "any")
    if kind == "array":
        return _array(schema)
    fmt = schema.get("format")
    limits = [
        f"{word} {schema[key]}"
        for key, word in (
            ("minimum", "≥"),
            ("maximum", "≤"),
            ("exclusiveMinimum", ">"),
            ("exclusiveMaximum", "<"),
            ("minLength", "length ≥"),
            ("maxLength", "length ≤"),
        )
        if key in schema
    ]
    text = f"{kind} ({fmt})" if fmt else str(kind)
    return f"{text}, {', '.join(limits)}" if limits else text


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _operation(path: str, method: str, op: Mapping[str, Any]) -> list[str]:
    lines = [f"### `{method.upper()} {path}`", "", op.get("summary", "")]
    if op.get("security") == []:
        lines += ["", "No token needed."]
    params = op.get("parameters", [])
    if params:
        lines += ["", "| Parameter | In | Type | Required | Description |", "|---|---|---|---|---|"]
        lines += [
            f"| `{p['name']}` | {p['in']} | {_cell(_type(p['schema']))} | "
            f"{'yes' if p.get('required') else 'no'} | {_cell(p.get('description', ''))} |"
            for p in params
        ]
    body = op.get("requestBody")
    if body is not None:
        for media, content in body["content"].items():
            lines += [
                "",
                f"Body ({media}): {_type(content['schema'])}. {body.get('description', '')}",
            ]
            lines += ["", "```json", json.dumps(content["example"], indent=2), "```"]
    lines += ["", "| Status | Answer |", "|---|---|"]
    for status, answer in op["responses"].items():
        content = answer.get("content", {})
        what = ", ".join(f"{_type(c['schema'])} ({m})" for m, c in content.items())
        lines.append(f"| {status} | {_cell(answer['description'])} {what} |")
    return [*lines, ""]


def markdown(doc: Mapping[str, Any]) -> str:
    """The reference page of ``doc``: every operation, then every schema."""
    info = doc["info"]
    lines = [
        f"# {info['title']} API",
        "",
        "<!-- Made by `mowdeck contracts export` from the OpenAPI document; do not edit. -->",
        "",
        info.get("description", ""),
        "",
        "Every error answer is an `application/problem+json` "
        "[ProblemDocument](#problemdocument). See docs/api.md for pages and clients.",
        "",
        "## Operations",
        "",
    ]
    for path, item in doc["paths"].items():
        for method in _METHODS:
            if method in item:
                lines += _operation(path, method, item[method])
    lines += ["## Schemas", ""]
    for name, schema in sorted(doc["components"]["schemas"].items()):
        lines += [f"### {name}", "", _cell(schema.get("description", ""))]
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        if props:
            lines += ["", "| Field | Type | Required |", "|---|---|---|"]
            lines += [
                f"| `{field}` | {_cell(_type(spec))} | {'yes' if field in required else 'no'} |"
                for field, spec in props.items()
            ]
        elif "oneOf" in schema or "anyOf" in schema:
            lines += ["", f"One of: {_type(schema)}."]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
