"""``mowdeck contracts export|check``: the v1 JSON Schemas."""

from __future__ import annotations

import argparse
from pathlib import Path

from contracts.v1.schema import SCHEMA_DIR, stale_schemas, write_schemas
from mowdeck.errors import MowdeckError


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mowdeck contracts``."""
    parser.add_argument("action", choices=["export", "check"])
    parser.add_argument("--dir", type=Path, default=SCHEMA_DIR, help="schema folder")


class ContractsCommandError(MowdeckError):
    """The schema folder cannot be written or read."""


def run(args: argparse.Namespace) -> int:
    """Export the schemas, or check that the committed ones are current."""
    try:
        if args.action == "export":
            for path in write_schemas(args.dir):
                print(path)
            return 0
        stale = stale_schemas(args.dir)
    except OSError as err:
        where = err.filename or args.dir
        raise ContractsCommandError(f"{where}: {err.strerror or err}") from err
    for name in stale:
        print(f"stale: {name}")
    return 1 if stale else 0
