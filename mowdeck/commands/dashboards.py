"""``mowdeck dashboards export|check``: the Grafana dashboards under deploy/grafana/."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from mowdeck.errors import MowdeckError

# mowdeck.dashboards.DASHBOARD_DIR, without importing the generator (a development
# dependency) to build the parser.
_DEFAULT_DIR = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "dashboards"


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mowdeck dashboards``."""
    parser.add_argument("action", choices=["export", "check"])
    parser.add_argument("--dir", type=Path, default=_DEFAULT_DIR, help="dashboard folder")


class DashboardsCommandError(MowdeckError):
    """The generator is not installed, or the dashboard folder cannot be written or read."""


def run(args: argparse.Namespace) -> int:
    """Export the dashboards, or check that the committed ones are current."""
    if importlib.util.find_spec("grafana_foundation_sdk") is None:
        raise DashboardsCommandError(
            "the dashboards are made with grafana-foundation-sdk, a development dependency:"
            " pip install -e '.[dev]'"
        )
    from mowdeck.dashboards import stale_dashboards, write_dashboards  # noqa: PLC0415

    try:
        if args.action == "export":
            for path in write_dashboards(args.dir):
                print(path)
            return 0
        stale = stale_dashboards(args.dir)
    except OSError as err:
        where = err.filename or args.dir
        raise DashboardsCommandError(f"{where}: {err.strerror or err}") from err
    for name in stale:
        print(f"stale: {name}")
    return 1 if stale else 0
