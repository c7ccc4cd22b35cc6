"""The ``mowdeck`` command: one entry point, a subcommand per service and tool."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import sys
from collections.abc import Callable, Sequence

from mowdeck.errors import MowdeckError

__all__ = ["build_parser", "commands", "main"]

# (name, module, help): the module has ``configure(parser)`` and ``run(args)``.
_ALWAYS: tuple[tuple[str, str, str], ...] = (
    ("migrate", "mowdeck.commands.migrate", "Apply the SQL migrations of every service."),
    ("streams", "mowdeck.commands.streams", "Apply the JetStream stream definitions (admin)."),
    ("nats-config", "mowdeck.commands.nats_config", "Write NATS server configs and users."),
    ("contracts", "mowdeck.commands.contracts", "Work with the v1 contracts (export schemas)."),
    ("dashboards", "mowdeck.commands.dashboards", "Export or check the Grafana dashboards."),
    ("user", "mowdeck.commands.user", "Disable or delete a user (publishes identity events)."),
    ("backup", "mowdeck.commands.backup", "Snapshot the JetStream streams into a folder (admin)."),
    ("restore", "mowdeck.commands.restore", "Restore the streams from a backup (admin)."),
)
# Offered when their module is installed; services are added here as they exist.
_OPTIONAL: tuple[tuple[str, str, str], ...] = (
    ("gateway", "mowdeck.gateway.cli", "Run a Device-Gateway shard."),
    ("fleet", "mowdeck.fleet.cli", "Run the Fleet registry and command API."),
    ("telemetry", "mowdeck.telemetry.cli", "Run the Telemetry service."),
    ("notifications", "mowdeck.notifications.cli", "Run the Notifications service."),
    ("realtime", "mowdeck.realtime.cli", "Run the Realtime service (SSE and WebSocket streams)."),
    ("sim", "simulator.cli", "Run virtual mowers."),
    ("token", "mowdeck.authn.cli", "Mint a development JWT."),
    ("grant", "mowdeck.commands.grant", "Grant a user a role on an account or group."),
    ("demo", "mowdeck.demo.cli", "Run everything with simulated mowers."),
)


def commands() -> tuple[tuple[str, str, str], ...]:
    """The subcommands available in this installation, as (name, module, help)."""
    return _ALWAYS + tuple(entry for entry in _OPTIONAL if _exists(entry[1]))


def _exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:
        return False


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every available subcommand."""
    parser = argparse.ArgumentParser(
        prog="mowdeck", description="Backend for robotic mower fleets."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module, help_text in commands():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        mod = importlib.import_module(module)
        mod.configure(sp)
        sp.set_defaults(_run=mod.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``mowdeck`` command line."""
    parser = build_parser()
    args = parser.parse_args(argv)
    run: Callable[[argparse.Namespace], object] = args._run
    try:
        result = run(args)
        if asyncio.iscoroutine(result):
            result = asyncio.run(result)
    except MowdeckError as err:
        print(f"mowdeck {args.command}: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return int(result) if isinstance(result, int) else 0


if __name__ == "__main__":
    raise SystemExit(main())
