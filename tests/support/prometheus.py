"""Prometheus and promtool for tests: found, or a skip saying why (a failure with
``MOWDECK_REQUIRE_PROMETHEUS=1``, which CI sets); queries through the HTTP API."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

__all__ = [
    "DEPLOY",
    "ROOT",
    "dashboard_expressions",
    "dashboard_files",
    "promtool",
    "query",
    "require_prometheus",
    "runnable_expression",
]

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "prometheus"
# Before the dashboards have their place under deploy/grafana/, the one of docs/.
FORMER_DASHBOARD = ROOT / "docs" / "dashboards" / "mowdeck.json"


def _unavailable(reason: str) -> None:
    if os.environ.get("MOWDECK_REQUIRE_PROMETHEUS") == "1":
        pytest.fail(f"MOWDECK_REQUIRE_PROMETHEUS=1 but {reason}")
    pytest.skip(reason)


def require_prometheus() -> str:
    """The ``prometheus`` binary (``MOWDECK_PROMETHEUS`` or the PATH's), or skip/fail."""
    named = os.environ.get("MOWDECK_PROMETHEUS")
    found = named if named and Path(named).exists() else shutil.which("prometheus")
    if found is None:
        _unavailable("no prometheus binary (apt-get install prometheus)")
    assert found is not None
    return found


def promtool() -> str:
    """The ``promtool`` binary (beside ``prometheus`` in Debian's package), or skip/fail."""
    found = shutil.which("promtool")
    if found is None:
        _unavailable("no promtool binary (apt-get install prometheus)")
    assert found is not None
    return found


def run_promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``promtool ARGS`` with ``stdin``; its output in ``stdout`` and ``stderr``."""
    return subprocess.run(
        [promtool(), *args], input=stdin, capture_output=True, text=True, timeout=60, check=False
    )


def dashboard_files() -> list[Path]:
    """Every dashboard under ``deploy/grafana/``; the former one of ``docs/`` if none (and
    none at all when that is gone too: the test then says there is nothing to evaluate)."""
    found = [
        path
        for path in sorted((ROOT / "deploy" / "grafana").glob("**/*.json"))
        if "panels" in json.loads(path.read_text())
    ]
    return found or [p for p in [FORMER_DASHBOARD] if p.exists()]


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))  # rows hold theirs


def dashboard_expressions(path: Path) -> list[tuple[str, str]]:
    """``(panel title, PromQL)`` of every target of every panel of the dashboard ``path``."""
    dashboard = json.loads(path.read_text())
    found = []
    for panel in _panels(dashboard.get("panels", [])):
        for target in panel.get("targets", []):
            expr = target.get("expr")
            if expr and not target.get("hide"):
                found.append((str(panel.get("title", "")), str(expr)))
    return found


# Grafana's own variables, as it would set them over the last few minutes.
_BUILTINS = {
    "__rate_interval": "1m",
    "__interval": "15s",
    "__range": "5m",
    "__range_s": "300",
    "__interval_ms": "15000",
}
_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")


def runnable_expression(expr: str) -> str:
    """``expr`` as Grafana would send it: its built-in variables given values, every
    dashboard variable (a job, an instance, a channel) standing for all of its values."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2) or match.group(3)
        return _BUILTINS.get(name, ".*")

    # A variable compared with = matches all of its values as a regular expression.
    expr = re.sub(r'(\w+)\s*=\s*"(\$\{?\w+(?::\w+)?\}?|\[\[\w+\]\])"', r'\1=~"\2"', expr)
    return _VARIABLE.sub(value, expr)


async def query(http: aiohttp.ClientSession, url: str, expr: str) -> dict[str, Any]:
    """``expr`` evaluated now by the Prometheus at ``url``: the API's answer, whatever its
    status (``status``, and ``data`` or ``error``)."""
    async with http.post(f"{url}/api/v1/query", data={"query": expr}) as answer:
        body: dict[str, Any] = await answer.json(content_type=None)
    return body
