"""``mowdeck demo``: the command, until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal

from mowdeck.demo.banner import banner
from mowdeck.demo.running import running_demo
from mowdeck.kit.logging import configure_logging

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mowdeck demo``."""
    parser.add_argument("--mowers", type=int, default=20, help="simulated mowers (default 20)")
    parser.add_argument(
        "--speed", type=float, default=10.0, help="simulated seconds per second (default 10)"
    )
    parser.add_argument("--seed", type=int, default=1, help="reproducible mowers")
    parser.add_argument("--host", default="127.0.0.1", help="address every service listens on")
    parser.add_argument(
        "--port",
        type=int,
        default=8080,
        help="Fleet's port; Telemetry (+1), the gateway (+2), Notifications (+3), Realtime "
        "with the console (+4) and the simulator (+10) use the next ones (0: free ports)",
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
    async with running_demo(args) as demo:
        print(banner(demo), flush=True)
        started.set()
        await stop.wait()
        print("stopping...", flush=True)
