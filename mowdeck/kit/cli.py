"""What every service's command does: settings in, logging, migrations, run until a signal."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from mowdeck.authz import AuthzSettings
from mowdeck.kit.allocator import tuned_process
from mowdeck.kit.lifecycle import Service, run_services
from mowdeck.kit.logging import configure_logging
from mowdeck.kit.migrate import discover, migrate, sql_root
from mowdeck.kit.settings import BaseSettings

__all__ = ["add_migrate_option", "migrations_of", "run_service"]


def add_migrate_option(parser: argparse.ArgumentParser, service: str) -> None:
    """``--migrate``: apply the service's migrations (and authz's, when local) first."""
    parser.add_argument(
        "--migrate",
        action="store_true",
        help=f"apply the {service} (and, with MOWDECK_AUTHZ=local, authz) migrations first",
    )


def migrations_of(service: str, authz: AuthzSettings) -> list[str]:
    """The migration sets a service needs: its own, and authz's tuples when evaluated here."""
    return [service, "authz"] if authz.authz == "local" else [service]


async def run_service(
    settings: BaseSettings,
    build: Callable[[], Service],
    *,
    migrations: Sequence[str] = (),
    shutdown_timeout: float | None = None,
) -> int:
    """Configure logging, apply ``migrations``, then run ``build()`` until SIGTERM/SIGINT.

    ``build`` runs once logging is configured, so what it does at construction is logged
    as the service will be. ``shutdown_timeout`` defaults to the settings'.
    """
    configure_logging(settings.log_level, settings.log_format)
    # This process's allocator (kit/allocator.py), for as long as it runs.
    async with tuned_process(settings.malloc_tuning, settings.malloc_trim_interval_seconds):
        if migrations:
            await migrate(settings.database_url, discover(sql_root(), list(migrations)))
        service = build()
        timeout = (
            settings.shutdown_timeout_seconds if shutdown_timeout is None else shutdown_timeout
        )
        await run_services([service], shutdown_timeout=timeout)
    return 0
