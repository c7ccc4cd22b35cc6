"""``mowdeck realtime``: run the Realtime service, tuning this process's collector."""

from __future__ import annotations

import argparse
from typing import Any

from mowdeck.authn import load_auth_settings
from mowdeck.authz import load_authz_settings
from mowdeck.kit.cli import run_service
from mowdeck.kit.garbage_collector import set_young_threshold
from mowdeck.realtime.service import RealtimeService
from mowdeck.realtime.settings import RealtimeSettings, load_realtime_settings

__all__ = ["configure", "run", "tuned_service"]


def tuned_service(settings: RealtimeSettings, **options: Any) -> RealtimeService:
    """Realtime as its command runs it: the young threshold set, start-up frozen.

    What lives after start-up (the latest states of every mower, the subscriptions)
    lives as long as the process; frozen, full collections no longer walk it. For a
    process that runs the service for good, not one that builds and drops services.
    """
    set_young_threshold(settings.realtime_gc_young_threshold)

    def started() -> None:
        service.gc_pauses.freeze()

    service = RealtimeService(settings, on_started=started, **options)
    return service


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mowdeck realtime`` (none: it has no migrations of its own)."""
    del parser


async def run(args: argparse.Namespace) -> int:
    """Run Realtime until SIGTERM or SIGINT."""
    del args
    settings = load_realtime_settings()
    auth, authz = load_auth_settings(), load_authz_settings()

    def build() -> RealtimeService:
        return tuned_service(settings, auth_settings=auth, authz_settings=authz)

    return await run_service(settings, build)
