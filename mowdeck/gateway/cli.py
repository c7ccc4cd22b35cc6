"""``mowdeck gateway``: run one Device-Gateway shard."""

from __future__ import annotations

import argparse
import sys

from mowdeck.gateway.service import GatewayService
from mowdeck.gateway.settings import GatewaySettings
from mowdeck.kit.garbage_collector import set_young_threshold
from mowdeck.kit.lifecycle import run_services
from mowdeck.kit.logging import configure_logging
from mowdeck.kit.settings import load_settings

_SWITCH_INTERVAL_S = 0.001


def configure(parser: argparse.ArgumentParser) -> None:
    """``mowdeck gateway`` reads everything from ``MOWDECK_*`` variables (docs/gateway.md)."""
    parser.epilog = (
        "Settings: MOWDECK_NATS_URL, MOWDECK_SHARD_INDEX, MOWDECK_SHARD_COUNT, "
        "MOWDECK_TELEMETRY_HEARTBEAT_SECONDS, MOWDECK_HTTP_PORT, MOWDECK_BOOTSTRAP_MOWERS "
        "(development only)."
    )


async def run(args: argparse.Namespace) -> int:
    """Run until SIGTERM or SIGINT, then shut down gracefully."""
    del args  # every setting comes from the environment
    settings = load_settings(GatewaySettings)
    configure_logging(settings.log_level, settings.log_format)
    set_young_threshold(settings.gateway_gc_young_threshold)
    # The emergency lane's thread needs the interpreter a few times per stop; a busy
    # main thread hands it over at most every switch interval (5 ms by default).
    sys.setswitchinterval(_SWITCH_INTERVAL_S)
    service = GatewayService(settings, freeze_after_seed=True)
    await run_services([service], shutdown_timeout=settings.shutdown_timeout_seconds + 10)
    return 0
