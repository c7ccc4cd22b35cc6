"""``mowdeck demo``: a signal during a start that hangs stops it; start-up errors are one line."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from mowdeck import demo
from mowdeck.cli import main
from tests.support.natsserver import NatsServer
from tests.support.sharedtemp import shared_temp_folder


def _args(port: int = 0) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    demo.configure(parser)
    state = Path(tempfile.gettempdir(), "demo-state-of-the-tests")  # outside the checkout
    return parser.parse_args(["--port", str(port), "--mowers", "2", "--state-dir", str(state)])


def _started_in(folder: Path) -> list[str]:
    """What the demo left in ``folder``: its temp folders."""
    return [p.name for p in folder.iterdir() if p.name.startswith("mowdeck-")]


def _processes_under(folder: Path) -> list[str]:
    """Command lines of running processes that name ``folder`` (the embedded servers)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if str(folder) in cmdline and state != "Z":
            found.append(cmdline)
    return found


@pytest.fixture
def demo_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temp folder for everything the demo starts, and no configured NATS or PostgreSQL."""
    with shared_temp_folder() as folder:
        monkeypatch.setattr(tempfile, "tempdir", str(folder))
        for name in ("MOWDECK_NATS_URL", "MOWDECK_DATABASE_URL", "MOWDECK_JWT_SECRET"):
            monkeypatch.delenv(name, raising=False)
        yield folder


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self").exists(), reason="reads /proc")
async def test_a_signal_while_the_bus_is_unreachable_stops_and_cleans_up(
    demo_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reached = asyncio.Event()

    async def unreachable(*args: object, **kwargs: object) -> None:
        # Bus.connect retries for ever while NATS is not there.
        reached.set()
        await asyncio.Event().wait()

    monkeypatch.setattr(demo.Bus, "connect", unreachable)
    running = asyncio.ensure_future(demo.run(_args()))
    await asyncio.wait_for(reached.wait(), 60)
    assert _started_in(demo_tmp)  # the embedded servers run
    os.kill(os.getpid(), signal.SIGTERM)
    assert await asyncio.wait_for(running, 30) == 0
    assert _started_in(demo_tmp) == []
    assert _processes_under(demo_tmp) == []


def test_a_port_in_use_is_one_line(
    nats_server: NatsServer,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("MOWDECK_NATS_URL", nats_server.url)
    monkeypatch.setenv("MOWDECK_DATABASE_URL", database_url)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["demo", "--port", str(port), "--mowers", "1"]) == 2
    err = capsys.readouterr().err
    assert "mowdeck demo: cannot start the services:" in err
    assert "address already in use" in err
    assert "Traceback" not in err
