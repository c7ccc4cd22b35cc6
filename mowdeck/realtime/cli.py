"""``mowdeck realtime``: run the Realtime service."""

from __future__ import annotations

import argparse

from mowdeck.authn import load_auth_settings
from mowdeck.authz import load_authz_settings
from mowdeck.kit.cli import run_service
from mowdeck.realtime.service import RealtimeService
from mowdeck.realtime.settings import load_realtime_settings

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mowdeck realtime`` (none: it has no migrations of its own)."""
    del parser


async def run(args: argparse.Namespace) -> int:
    """Run Realtime until SIGTERM or SIGINT."""
    del args
    settings = load_realtime_settings()
    auth, authz = load_auth_settings(), load_authz_settings()

    def build() -> RealtimeService:
        return RealtimeService(settings, auth_settings=auth, authz_settings=authz)

    return await run_service(settings, build)
