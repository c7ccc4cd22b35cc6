"""The dashboards as JSON files: written, and compared with what is committed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from grafana_foundation_sdk.cog.encoder import JSONEncoder

from mowdeck.dashboards._panels import Board
from mowdeck.dashboards.overview import overview
from mowdeck.dashboards.services import fleet, gateway, notifications, realtime, telemetry

__all__ = ["DASHBOARD_DIR", "dashboards", "render", "stale_dashboards", "write_dashboards"]

# In a checkout: deploy/grafana/dashboards beside the package.
DASHBOARD_DIR = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "dashboards"

_BOARDS: tuple[tuple[str, Callable[[], Board]], ...] = (
    ("overview.json", overview),
    ("gateway.json", gateway),
    ("fleet.json", fleet),
    ("telemetry.json", telemetry),
    ("notifications.json", notifications),
    ("realtime.json", realtime),
)


def render(board: Board) -> str:
    """A dashboard as the JSON Grafana imports, keys sorted, ending in a newline."""
    return json.dumps(board.build(), cls=JSONEncoder, indent=2, sort_keys=True) + "\n"


def dashboards() -> dict[str, str]:
    """Every dashboard's JSON by file name."""
    return {name: render(make()) for name, make in _BOARDS}


def write_dashboards(folder: Path = DASHBOARD_DIR) -> list[Path]:
    """Write every dashboard into ``folder``; the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in dashboards().items():
        path = folder / name
        path.write_text(text)
        written.append(path)
    return written


def stale_dashboards(folder: Path = DASHBOARD_DIR) -> list[str]:
    """Files of ``folder`` that differ from what the code makes, are missing or left over."""
    made = dashboards()
    present = {p.name for p in folder.glob("*.json")} if folder.is_dir() else set()
    stale = [
        name
        for name, text in made.items()
        if name not in present or (folder / name).read_text() != text
    ]
    return sorted(stale + sorted(present - set(made)))
