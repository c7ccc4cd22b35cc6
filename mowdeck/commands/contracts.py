"""``mowdeck contracts export|check``: the v1 JSON Schemas and the APIs' OpenAPI documents."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contracts.v1.schema import SCHEMA_DIR, stale_schemas, write_schemas
from mowdeck.errors import MowdeckError
from mowdeck.fleet.openapi import openapi as fleet
from mowdeck.kit.openapi_markdown import markdown
from mowdeck.notifications.openapi import openapi as notifications
from mowdeck.realtime.openapi import openapi as realtime
from mowdeck.telemetry.openapi import openapi as telemetry
from simulator.openapi import openapi as simulator

__all__ = ["OPENAPI_DIR", "configure", "render_openapi", "run", "stale_openapi", "write_openapi"]

OPENAPI_DIR = Path(__file__).resolve().parents[2] / "docs" / "openapi"
DOCUMENTS: dict[str, Callable[[], dict[str, Any]]] = {
    "fleet": fleet,
    "telemetry": telemetry,
    "notifications": notifications,
    "realtime": realtime,
    "simulator": simulator,
}


def render_openapi() -> dict[str, str]:
    """File name to text for every HTTP API: its OpenAPI document (``<name>.json``) and
    its reference page (``../api/<name>.md``)."""
    out = {}
    for name, make in DOCUMENTS.items():
        doc = make()
        out[f"{name}.json"] = json.dumps(doc, indent=2, sort_keys=True) + "\n"
        out[f"../api/{name}.md"] = markdown(doc)
    return out


def write_openapi(directory: Path = OPENAPI_DIR) -> list[Path]:
    """Write every document into ``directory`` and every page beside it in ``../api``."""
    written = []
    for name, text in render_openapi().items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path.resolve())
    return written


def stale_openapi(directory: Path = OPENAPI_DIR) -> list[str]:
    """Names of documents and pages that are missing or different."""
    return sorted(
        name
        for name, text in render_openapi().items()
        if not (directory / name).exists() or (directory / name).read_text() != text
    )


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mowdeck contracts``."""
    parser.add_argument("action", choices=["export", "check"])
    parser.add_argument("--dir", type=Path, default=SCHEMA_DIR, help="schema folder")
    parser.add_argument(
        "--openapi-dir", type=Path, default=OPENAPI_DIR, help="OpenAPI documents folder"
    )


class ContractsCommandError(MowdeckError):
    """The schema folder cannot be written or read."""


def run(args: argparse.Namespace) -> int:
    """Export the schemas and documents, or check that the committed ones are current."""
    try:
        if args.action == "export":
            for path in [*write_schemas(args.dir), *write_openapi(args.openapi_dir)]:
                print(path)
            return 0
        stale = stale_schemas(args.dir) + stale_openapi(args.openapi_dir)
    except OSError as err:
        where = err.filename or args.dir
        raise ContractsCommandError(f"{where}: {err.strerror or err}") from err
    for name in stale:
        print(f"stale: {name}")
    return 1 if stale else 0
