"""``mowdeck gateway``: run one Device-Gateway shard."""

from __future__ import annotations

import argparse
import sys

from mowdeck.gateway.service import GatewayService
from mowdeck.gateway.settings import GatewaySettings
from mowdeck.kit.cli import run_service
from mowdeck.kit.garbage_collector import set_young_threshold
from mowdeck.kit.settings import load_settings

_SWITCH_INTERVAL_S = 0.001


def configure(parser: argparse.ArgumentParser) -> None:
    """``mowdeck gateway`` reads everything from ``MOWDECK_*`` variables (docs/gateway.md)."""
    parser.epilog = (
        "Settings: MOWDECK_NATS_URL, MOWDECK_SHARD_INDEX, MOWDECK_SHARD_COUNT, "
        "MOWDECK_TELEMETRY_HEARTBEAT_SECONDS, MOWDECK_HTTP_PORT, MOWDECK_BOOTSTRAP_MOWERS "
        "(development only)."
    )


def freeze(service: GatewayService) -> None:
    """Move what lives after the seed out of the collector's sight (this process only).

    The controllers, links and registrations live as long as the process; a full
    collection walking them all is a pause in every mower's command path.
    """
    service.gc_pauses.freeze_long_lived("shard mowers seeded")


async def run(args: argparse.Namespace) -> int:
    """Run until SIGTERM or SIGINT, then shut down gracefully."""
    del args  # every setting comes from the environment
    settings = load_settings(GatewaySettings)

    def build() -> GatewayService:
        # This process's collector and scheduling, set where the process starts.
        set_young_threshold(settings.gateway_gc_young_threshold)
        # The emergency lane's thread needs the interpreter a few times per stop; a busy
        # main thread hands it over at most every switch interval (5 ms by default).
        sys.setswitchinterval(_SWITCH_INTERVAL_S)
        service = GatewayService(settings, on_seeded=lambda: freeze(service))
        return service

    return await run_service(
        settings, build, shutdown_timeout=settings.shutdown_timeout_seconds + 10
    )
