"""A gateway in an OS process of its own (``mowdeck gateway``), for SIGTERM and SIGKILL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import aiohttp

__all__ = ["metric", "ready", "rss_mb", "spawn_gateway"]


def spawn_gateway(
    url: str,
    mowers_json: str,
    port: int,
    log: Path,
    shard: tuple[int, int] = (0, 1),
    **env: str,
) -> subprocess.Popen[bytes]:
    """``mowdeck gateway`` with ``MOWDECK_*`` settings (``env``: more, by variable name)."""
    variables = {
        **os.environ,
        "MOWDECK_NATS_URL": url,
        "MOWDECK_BOOTSTRAP_MOWERS": mowers_json,
        "MOWDECK_HTTP_PORT": str(port),
        "MOWDECK_LOG_FORMAT": "json",
        "MOWDECK_FLEET_RETRY_MAX_SECONDS": "1",
        "MOWDECK_SHUTDOWN_TIMEOUT_SECONDS": "30",
        "MOWDECK_SHARD_INDEX": str(shard[0]),
        "MOWDECK_SHARD_COUNT": str(shard[1]),
        "MOWDECK_GATEWAY_DEVICE_HOSTS": '["127.0.0.1"]',
        **env,
    }
    with log.open("ab") as sink:  # a file, not a pipe: a full pipe would block the gateway
        return subprocess.Popen(
            [sys.executable, "-m", "mowdeck.cli", "gateway"],
            env=variables,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )


async def ready(port: int) -> bool:
    """Whether the gateway on ``port`` reports ready."""
    try:
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"http://127.0.0.1:{port}/readyz") as response,
        ):
            return response.status == 200
    except aiohttp.ClientError:
        return False


async def metric(port: int, name: str) -> float:
    """The sum of every sample of metric ``name`` (and names it prefixes)."""
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}/metrics") as response,
    ):
        text = await response.text()
    return sum(
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith(name) and not line.startswith("#")
    )


def rss_mb(pid: int) -> float:
    """Resident memory of a process in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")
