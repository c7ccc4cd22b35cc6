"""``mowdeck demo``: the command, until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys

from mowdeck.demo.banner import banner
from mowdeck.demo.prometheus import prometheus_binary, rule_files, scrape_targets, start_prometheus
from mowdeck.demo.running import Demo, running_demo
from mowdeck.kit.logging import configure_logging

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mowdeck demo``."""
    parser.add_argument("--mowers", type=int, default=20, help="simulated mowers (default 20)")
    parser.add_argument(
        "--speed", type=float, default=10.0, help="simulated seconds per second (default 10)"
    )
    parser.add_argument("--seed", type=int, default=1, help="reproducible mowers")
    parser.add_argument(
        "--report-interval",
        type=float,
        default=1.0,
        help="simulated seconds between a mower's periodic states (default 1)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address every service listens on")
    parser.add_argument(
        "--port",
        type=int,
        default=8080,
        help="Fleet's port; Telemetry (+1), the gateway (+2), Notifications (+3), Realtime "
        "with the console (+4) and the simulator (+10) use the next ones (0: free ports)",
    )
    parser.add_argument(
        "--openmower",
        type=int,
        metavar="N",
        help="of the mowers, N speak OpenMower over MQTT (default 3 of 10 or more, else 0);"
        " the broker is MOWDECK_DEMO_MQTT_BROKER or a mosquitto the demo starts",
    )
    parser.add_argument(
        "--automower",
        type=int,
        metavar="N",
        help="of the mowers, N are Husqvarna Automowers of a stand-in Automower Connect"
        " cloud on the port after the simulator's (default 3 of 10 or more, else 0)",
    )
    parser.add_argument(
        "--prometheus",
        action="store_true",
        help="also start a Prometheus (the prometheus binary on the PATH) scraping every"
        " service, with the alert and SLO rules of deploy/prometheus/rules loaded",
    )
    parser.add_argument(
        "--state-dir",
        default=".mowdeck",
        help="where the demo keeps its token signing key across runs (default .mowdeck)",
    )


async def run(args: argparse.Namespace) -> int:
    """Run the demo until Ctrl-C or SIGTERM."""
    configure_logging(
        os.environ.get("MOWDECK_LOG_LEVEL", "warning"),
        "console" if os.environ.get("MOWDECK_LOG_FORMAT") is None else "json",
    )
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    started = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        # The start can wait long (NATS or PostgreSQL not reachable yet): a signal meanwhile
        # cancels it, and what had started is stopped and removed again.
        serving = asyncio.ensure_future(_serve(args, stop, started))
        signalled = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({serving, signalled}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            signalled.cancel()
        if not serving.done() and not started.is_set():
            print("stopping while starting...", flush=True)
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving
        else:
            await serving
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    print("stopped.", flush=True)
    return 0


async def _serve(args: argparse.Namespace, stop: asyncio.Event, started: asyncio.Event) -> None:
    async with running_demo(args) as demo, contextlib.AsyncExitStack() as stack:
        if getattr(args, "prometheus", False):
            await _prometheus(demo, args.host, stack)
        print(banner(demo), flush=True)
        started.set()
        await stop.wait()
        print("stopping...", flush=True)


async def _prometheus(demo: Demo, host: str, stack: contextlib.AsyncExitStack) -> None:
    """Start the demo's Prometheus into ``stack``; without the binary, say so and go on."""
    if prometheus_binary() is None:
        print(
            "mowdeck demo: --prometheus: no prometheus binary on the PATH (install Debian's"
            " package: apt-get install prometheus, or set MOWDECK_PROMETHEUS to one); the"
            " demo runs without it",
            file=sys.stderr,
            flush=True,
        )
        return
    rules = rule_files()
    running = await stack.enter_async_context(
        start_prometheus(scrape_targets(demo.metrics_urls()), host=host, rules=rules)
    )
    demo.prometheus_url = running.url
    demo.prometheus_rules = len(rules)
