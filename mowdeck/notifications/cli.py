"""``mowdeck notifications``: run the Notifications service."""

from __future__ import annotations

import argparse

from mowdeck.authn import load_auth_settings
from mowdeck.authz import load_authz_settings
from mowdeck.kit.cli import add_migrate_option, migrations_of, run_service
from mowdeck.notifications.service import NotificationsService
from mowdeck.notifications.settings import load_notifications_settings

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mowdeck notifications``."""
    add_migrate_option(parser, "notifications")


async def run(args: argparse.Namespace) -> int:
    """Run Notifications until SIGTERM or SIGINT."""
    settings = load_notifications_settings()
    auth, authz = load_auth_settings(), load_authz_settings()

    def build() -> NotificationsService:
        return NotificationsService(settings, auth_settings=auth, authz_settings=authz)

    migrations = migrations_of("notifications", authz) if args.migrate else ()
    return await run_service(settings, build, migrations=migrations)
