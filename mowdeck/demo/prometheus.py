"""A Prometheus of the demo's own: ``mowdeck demo --prometheus``.

It scrapes every service of the demo and the simulator, with the alert and SLO rules of
``deploy/prometheus/rules/`` loaded (``MOWDECK_PROMETHEUS_RULES_DIR`` names another
folder), keeps its data in a temporary folder removed on exit, and listens on a free port
of the demo's host. The binary is ``prometheus`` on the PATH (Debian's package of that
name), or ``MOWDECK_PROMETHEUS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path

import aiohttp
import yarl

from mowdeck.errors import MowdeckError
from mowdeck.kit.ports import free_port

__all__ = [
    "PrometheusError",
    "RunningPrometheus",
    "prometheus_binary",
    "prometheus_config",
    "rule_files",
    "scrape_targets",
    "start_prometheus",
]

# How long a started Prometheus may take to say it is ready.
READY_TIMEOUT_S = 30.0


class PrometheusError(MowdeckError):
    """Prometheus could not be started, or is not installed."""


def prometheus_binary() -> str | None:
    """``MOWDECK_PROMETHEUS``, else ``prometheus`` on the PATH; None when neither exists."""
    named = os.environ.get("MOWDECK_PROMETHEUS")
    if named:
        return named if Path(named).exists() else None
    return shutil.which("prometheus")


def rule_files() -> list[Path]:
    """The rule files: ``*.yml`` of ``MOWDECK_PROMETHEUS_RULES_DIR``, else of the checkout's
    ``deploy/prometheus/rules/`` (none for an installed package without the checkout)."""
    override = os.environ.get("MOWDECK_PROMETHEUS_RULES_DIR")
    folder = (
        Path(override)
        if override
        else Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "rules"
    )
    return sorted(folder.glob("*.yml")) if folder.is_dir() else []


def scrape_targets(urls: Mapping[str, str]) -> dict[str, list[str]]:
    """``host:port`` to scrape by job, from each service's base URL by job name."""
    targets: dict[str, list[str]] = {}
    for job, url in urls.items():
        parsed = yarl.URL(url)
        host = parsed.host or "127.0.0.1"
        host = f"[{host}]" if ":" in host else host
        targets.setdefault(job, []).append(f"{host}:{parsed.port}")
    return targets


def prometheus_config(
    targets: Mapping[str, Sequence[str]],
    rules: Sequence[Path],
    *,
    scrape_interval_s: float = 5.0,
) -> str:
    """The configuration: one job per entry of ``targets``, ``rules`` loaded.

    Written as JSON, which is YAML too.
    """
    interval = f"{int(scrape_interval_s * 1000)}ms"
    config = {
        "global": {
            "scrape_interval": interval,
            "evaluation_interval": interval,
            "scrape_timeout": interval,
        },
        "rule_files": [str(path) for path in rules],
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": list(hosts)}]}
            for job, hosts in targets.items()
        ],
    }
    return json.dumps(config, indent=2)


class RunningPrometheus:
    """A started Prometheus: its URL, its log, and how to stop it."""

    def __init__(self, process: subprocess.Popen[bytes], url: str, folder: Path) -> None:
        self.process = process
        self.url = url
        self.folder = folder

    @property
    def log(self) -> str:
        """What it wrote so far (its standard error)."""
        path = self.folder / "prometheus.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        """Stop it (SIGTERM, then SIGKILL after 10 s) and wait."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextlib.contextmanager
def _folder() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="mowdeck-prometheus-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.asynccontextmanager
async def start_prometheus(
    targets: Mapping[str, Sequence[str]],
    *,
    host: str = "127.0.0.1",
    rules: Sequence[Path] | None = None,
    scrape_interval_s: float = 5.0,
    binary: str | None = None,
) -> AsyncIterator[RunningPrometheus]:
    """Start Prometheus scraping ``targets`` with ``rules`` (``rule_files()`` when None),
    wait until it is ready, and stop it and remove its data on exit."""
    found = binary or prometheus_binary()
    if found is None:
        raise PrometheusError(
            "no prometheus binary: install Debian's package (apt-get install prometheus)"
            " or set MOWDECK_PROMETHEUS to one"
        )
    with _folder() as folder:
        config = folder / "prometheus.yml"
        config.write_text(
            prometheus_config(
                targets,
                rule_files() if rules is None else rules,
                scrape_interval_s=scrape_interval_s,
            )
        )
        port = free_port(host)
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        with (folder / "prometheus.log").open("wb") as log:
            process = subprocess.Popen(  # noqa: ASYNC220, S603 - started once; the binary is the operator's
                [
                    found,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={folder / 'data'}",
                    f"--web.listen-address={address}",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
            )
        running = RunningPrometheus(process, f"http://{address}", folder)
        try:
            await _until_ready(running)
            yield running
        finally:
            await asyncio.to_thread(running.stop)


async def _until_ready(running: RunningPrometheus) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    async with aiohttp.ClientSession() as http:
        while True:
            if running.process.poll() is not None:
                raise PrometheusError(
                    f"prometheus exited with status {running.process.returncode}:"
                    f" {running.log.strip()[-2000:]}"
                )
            with contextlib.suppress(aiohttp.ClientError):
                async with http.get(f"{running.url}/-/ready") as answer:
                    if answer.status == 200:
                        return
            if time.monotonic() > deadline:
                raise PrometheusError(f"prometheus not ready within {READY_TIMEOUT_S:g} s")
            await asyncio.sleep(0.1)
