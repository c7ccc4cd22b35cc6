"""``mowdeck notifications``: run the Notifications service, tuning this process's collector."""

from __future__ import annotations

import argparse
from typing import Any

from mowdeck.authn import load_auth_settings
from mowdeck.authz import load_authz_settings
from mowdeck.kit.cli import add_migrate_option, migrations_of, run_service
from mowdeck.kit.garbage_collector import freeze_after_actor_starts, set_young_threshold
from mowdeck.notifications.service import NotificationsService
from mowdeck.notifications.settings import NotificationsSettings, load_notifications_settings

__all__ = ["configure", "configure_gc", "freezing_service", "run"]


def configure_gc(settings: NotificationsSettings) -> None:
    """Apply ``notifications_gc_young_threshold`` to this process."""
    set_young_threshold(settings.notifications_gc_young_threshold)


def freezing_service(settings: NotificationsSettings, **options: Any) -> NotificationsService:
    """Notifications as its command runs it: the process's live objects are frozen
    after a burst of actor starts (``kit.garbage_collector.freeze_after_actor_starts``)."""
    return freeze_after_actor_starts(
        lambda started: NotificationsService(settings, on_actors_started=started, **options)
    )


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
