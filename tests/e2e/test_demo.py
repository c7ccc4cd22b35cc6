"""`mowdeck demo` on embedded servers: a mower commanded, then a clean shutdown."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.sharedtemp import shared_temp_folder


def _post(url: str, token: str, body: dict[str, object]) -> dict[str, object]:
    request = urllib.request.Request(  # noqa: S310 - a loopback URL the demo printed
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        return json.loads(response.read())  # type: ignore[no-any-return]


DEMO = [sys.executable, "-m", "mowdeck.cli", "demo", "--port", "0"]


def _first_event(url: str, token: str) -> str:
    """The first event block of a Server-Sent Events stream."""
    request = urllib.request.Request(  # noqa: S310 - an http URL from the banner
        url, headers={"Authorization": f"Bearer {token}"}
    )
    block = ""
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        while not block.endswith("\n\n"):
            block += response.readline().decode()
    return block


@pytest.fixture
def demo_temp() -> Iterator[Path]:
    """The demo's TMPDIR: its embedded servers' folders, even as root (see shared_temp_folder)."""
    with shared_temp_folder() as folder:
        yield folder


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_demo_runs_commands_and_shuts_down_cleanly(tmp_path: Path, demo_temp: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("MOWDECK_NATS_URL", "MOWDECK_DATABASE_URL", "MOWDECK_JWT_SECRET")
    }
    env["TMPDIR"] = str(demo_temp)  # everything the demo starts lives here
    log = tmp_path / "demo.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [*DEMO, "--mowers", "3", "--state-dir", str(tmp_path / "state")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=sink,
            text=True,
        )
    try:
        assert proc.stdout is not None
        banner = ""
        deadline = time.monotonic() + 120
        while "Ctrl-C" not in banner:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, log.read_text()[-3000:]
            banner += line
            assert time.monotonic() < deadline, banner
        fleet = re.search(r"Fleet\s+(http://\S+)", banner)
        token = re.search(r"export TOKEN=(\S+)", banner)
        mower = re.search(r"/v1/mowers/([0-9a-f-]{36})/commands", banner)
        assert fleet and token and mower, banner
        result = _post(
            f"{fleet.group(1)}/v1/mowers/{mower.group(1)}/commands?wait=20",
            token.group(1),
            {"command": {"kind": "start_mow"}},
        )
        assert result["status"] == "executed", json.dumps(result)  # in full, with the reason
        realtime = re.search(r"Realtime\s+(http://\S+)", banner)
        assert realtime, banner
        assert "event: snapshot" in _first_event(realtime.group(1), token.group(1))
        # The console the banner prints first is Realtime's page.
        console = re.search(r"Console\s+(http://[^/\s]+)/\?code=\S+", banner)
        assert console and realtime.group(1).startswith(console.group(1) + "/"), banner
        with urllib.request.urlopen(f"{console.group(1)}/", timeout=30) as page:  # noqa: S310
            assert b"/console/app.js" in page.read()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    leftovers = [p.name for p in demo_temp.iterdir() if p.name.startswith("mowdeck-")]
    assert leftovers == []
