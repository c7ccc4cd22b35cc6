"""JSON Schema export of the v1 models; a test fails when the committed files are stale."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from contracts.v1.commands import CommandEnvelope, CommandResult
from contracts.v1.events import EVENT_PAYLOADS, EventEnvelope
from contracts.v1.fleet import MowerLink, MowerListReply, MowerListRequest, MowerRegistration
from contracts.v1.sites import SiteAreasReply, SiteAreasRequest
from contracts.v1.telemetry import MowerState

__all__ = ["SCHEMA_DIR", "render_schemas", "stale_schemas", "write_schemas"]

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas" / "v1"

_MODELS: dict[str, Any] = {
    "CommandEnvelope": CommandEnvelope,
    "CommandResult": CommandResult,
    "MowerState": MowerState,
    "MowerRegistration": MowerRegistration,
    "MowerListRequest": MowerListRequest,
    "MowerListReply": MowerListReply,
    "MowerLink": MowerLink,
    "SiteAreasRequest": SiteAreasRequest,
    "SiteAreasReply": SiteAreasReply,
}


def render_schemas() -> dict[str, str]:
    """File name to JSON Schema text for every v1 model and every event type."""
    out: dict[str, str] = {}
    for name, model in _MODELS.items():
        out[f"{name}.json"] = _dump(msgspec.json.schema(model))
    for (event_type, version), payload in sorted(EVENT_PAYLOADS.items()):
        schema = msgspec.json.schema(EventEnvelope[payload])  # type: ignore[valid-type]
        _pin_event(schema, event_type, version)
        schema["title"] = f"EventEnvelope {event_type} v{version}"
        out[f"event.{event_type}.v{version}.json"] = _dump(schema)
    return out


def _pin_event(schema: dict[str, Any], event_type: str, version: int) -> None:
    """Pin ``type`` and ``version`` of an event schema to the one event it describes.

    The envelope is generic: without the pins a validator elsewhere would accept any event
    type under this file. ``version`` may be left out only where its default is the pin.
    """
    envelope = schema["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    props = envelope["properties"]
    props["type"] = {"const": event_type, "type": "string"}
    props["version"] = {"const": version, "default": 1, "type": "integer"}
    if version != 1:
        envelope["required"] = [*envelope["required"], "version"]
    envelope["description"] = (
        f"The event ``{event_type}`` version {version}: its ``payload`` is "
        f"{EVENT_PAYLOADS[(event_type, version)].__name__}. ``occurred_at`` is normalised to UTC."
    )


def _dump(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def write_schemas(directory: Path = SCHEMA_DIR) -> list[Path]:
    """Write every schema into ``directory``, removing files of models that no longer exist."""
    directory.mkdir(parents=True, exist_ok=True)
    rendered = render_schemas()
    for stray in directory.glob("*.json"):
        if stray.name not in rendered:
            stray.unlink()
    written = []
    for name, text in rendered.items():
        path = directory / name
        path.write_text(text)
        written.append(path)
    return written


def stale_schemas(directory: Path = SCHEMA_DIR) -> list[str]:
    """Names of schema files that are missing, different or no longer produced."""
    rendered = render_schemas()
    stale = [
        name
        for name, text in rendered.items()
        if not (directory / name).exists() or (directory / name).read_text() != text
    ]
    stale += [p.name for p in directory.glob("*.json") if p.name not in rendered]
    return sorted(stale)
