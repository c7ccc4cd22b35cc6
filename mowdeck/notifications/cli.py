"""``mowdeck notifications``: run the Notifications service, tuning this process's collector."""

from __future__ import annotations

import argparse
from typing import Any

from mowdeck.authn import load_auth_settings
from mowdeck.authz import load_authz_settings
from mowdeck.kit.cli import add_migrate_option, migrations_of, run_service
from mowdeck.kit.garbage_collector import set_young_threshold
from mowdeck.notifications.service import NotificationsService
from mowdeck.notifications.settings import NotificationsSettings, load_notifications_settings

__all__ = ["FREEZE_AFTER_STARTS", "configure", "configure_gc", "freezing_service", "run"]

# Starting this many watch actors at once is start-up (or a shard moving here): a good
# moment to move what now lives for good out of the collector's sight.
FREEZE_AFTER_STARTS = 100


def configure_gc(settings: NotificationsSettings) -> None:
    """Apply ``notifications_gc_young_threshold`` to this process."""
    set_young_threshold(settings.notifications_gc_young_threshold)


def freezing_service(settings: NotificationsSettings, **options: Any) -> NotificationsService:
    """Notifications that freezes the process's live objects after a burst of actor starts.

    The watch actors and their watches live as long as the service; without the freeze
    every full collection walks them again (docs/actors.md). For a process that runs the
    service for good, not one that builds and drops services.
    """

    def started(count: int) -> None:
        if count >= FREEZE_AFTER_STARTS:
            service.gc_pauses.freeze()

    service = NotificationsService(settings, on_actors_started=started, **options)
    return service


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mowdeck notifications``."""
    add_migrate_option(parser, "notifications")


async def run(args: argparse.Namespace) -> int:
    """Run Notifications until SIGTERM or SIGINT."""
    settings = load_notifications_settings()
    auth, authz = load_auth_settings(), load_authz_settings()

    def build() -> NotificationsService:
        configure_gc(settings)
        return freezing_service(settings, auth_settings=auth, authz_settings=authz)

    migrations = migrations_of("notifications", authz) if args.migrate else ()
    return await run_service(settings, build, migrations=migrations)
