"""``mowdeck telemetry``: run the Telemetry service."""

from __future__ import annotations

import argparse

from mowdeck.authn import load_auth_settings
from mowdeck.authz import load_authz_settings
from mowdeck.kit.lifecycle import run_services
from mowdeck.kit.logging import configure_logging
from mowdeck.kit.migrate import discover, migrate, sql_root
from mowdeck.telemetry.service import TelemetryService, configure_gc
from mowdeck.telemetry.settings import load_telemetry_settings


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mowdeck telemetry``."""
    parser.add_argument(
        "--migrate",
        action="store_true",
        help="apply the telemetry (and, with MOWDECK_AUTHZ=local, authz) migrations first",
    )


async def run(args: argparse.Namespace) -> int:
    """Run Telemetry until SIGTERM or SIGINT."""
    settings = load_telemetry_settings()
    auth, authz = load_auth_settings(), load_authz_settings()
    configure_logging(settings.log_level, settings.log_format)
    configure_gc(settings)
    if args.migrate:
        services = ["telemetry", "authz"] if authz.authz == "local" else ["telemetry"]
        await migrate(settings.database_url, discover(sql_root(), services))
    service = TelemetryService(settings, auth_settings=auth, authz_settings=authz)
    await run_services([service], shutdown_timeout=settings.shutdown_timeout_seconds)
    return 0
