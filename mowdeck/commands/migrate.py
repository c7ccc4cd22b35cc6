"""``mowdeck migrate``: apply the forward-only SQL migrations."""

from __future__ import annotations

import argparse

from mowdeck.kit.logging import configure_logging
from mowdeck.kit.migrate import discover, migrate, sql_root
from mowdeck.kit.settings import BaseSettings, load_settings


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mowdeck migrate``."""
    parser.add_argument(
        "services", nargs="*", help="services to migrate (default: every folder under sql/)"
    )


async def run(args: argparse.Namespace) -> int:
    """Apply what is pending against ``MOWDECK_DATABASE_URL``."""
    settings = load_settings(BaseSettings)
    configure_logging(settings.log_level, settings.log_format)
    migrations = discover(sql_root(), args.services or None)
    applied = await migrate(
        settings.database_url,
        migrations,
        statement_timeout_ms=settings.database_maintenance_statement_timeout_ms,
    )
    print(f"applied {len(applied)} of {len(migrations)} migrations")
    return 0
