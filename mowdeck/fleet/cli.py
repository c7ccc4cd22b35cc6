"""``mowdeck fleet``: run the Fleet service."""

from __future__ import annotations

import argparse

from mowdeck.authn import load_auth_settings
from mowdeck.authz import load_authz_settings
from mowdeck.fleet.service import FleetService
from mowdeck.fleet.settings import load_fleet_settings
from mowdeck.kit.cli import add_migrate_option, migrations_of, run_service


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mowdeck fleet``."""
    add_migrate_option(parser, "fleet")


async def run(args: argparse.Namespace) -> int:
    """Run Fleet until SIGTERM or SIGINT."""
    settings = load_fleet_settings()
    auth, authz = load_auth_settings(), load_authz_settings()
    return await run_service(
        settings,
        lambda: FleetService(settings, auth_settings=auth, authz_settings=authz),
        migrations=migrations_of("fleet", authz) if args.migrate else (),
    )
