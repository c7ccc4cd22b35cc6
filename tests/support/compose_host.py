"""``compose.yaml``'s Mowdeck containers run as processes on this host, without a container engine.

Each container's process gets exactly the environment compose gives it (the shared
``x-mowdeck`` block merged with its own, then its bus user's ``/nats-auth/<BUS_USER>.env``
as its entrypoint reads it), translated only where a container and a host differ:

- a compose host name with its port (``nats-1:4222``, ``fleet:8080``, ``simulator:8765``)
  becomes ``127.0.0.1`` and the port the test's server of that name listens on; the
  PostgreSQL URL's host and database become the test's;
- a container port a process listens on (``MOWDECK_HTTP_PORT``, ``--listen 0.0.0.0:8765``)
  becomes a free host port, as a port mapping would publish it;
- a path inside a volume (``/nats-auth``, ``/vapid``, ``/app`` for the checkout) becomes
  the volume's folder: a temporary one per named volume, the repository for ``.``;
- ``$$`` is compose's escape for ``$``.

The three NATS nodes run the users and permissions the one-shot ``nats-config`` writes into
the ``nats-auth`` volume (its command, run as compose runs it), on loopback ports.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml

from mowdeck.kit.ports import free_port

__all__ = ["ComposeHost", "Process", "load_compose"]

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "compose.yaml"
BIN = Path(sys.executable).parent


def load_compose(path: Path = COMPOSE) -> dict[str, Any]:
    """The compose file, its ``<<`` merges applied (PyYAML's merge keys)."""
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


def command_of(service: dict[str, Any]) -> list[str]:
    """A service's command as argv, compose's ``$$`` read as ``$``."""
    command = service.get("command") or []
    if isinstance(command, str):
        command = shlex.split(command)
    return [str(part).replace("$$", "$") for part in command]


def runs_mowdeck(service: dict[str, Any]) -> bool:
    """Whether the container runs a ``mowdeck`` command (the Mowdeck image's services)."""
    return bool(re.search(r"(?:^|[\s;&(])mowdeck ", " ".join(command_of(service)) + " "))


@dataclass
class Process:
    """One container's process, its output kept in a file."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        """What it printed so far."""
        return self.log.read_text(errors="replace")

    def tail(self, lines: int = 40) -> str:
        """The last lines it printed, for a failure's message."""
        return "\n".join(self.output().splitlines()[-lines:])

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, as ``docker compose stop`` sends; after ``timeout`` SIGABRT, whose
        faulthandler dump shows in the output where every thread stood, then SIGKILL."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGABRT)
                try:
                    self.proc.wait(5)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait()
        return self.proc.returncode


@dataclass
class ComposeHost:
    """The compose topology's addresses and volumes on this host."""

    compose: dict[str, Any]
    workdir: Path
    database_url: str
    nats_ports: dict[str, int]
    # (service, container port) -> host port.
    published: dict[tuple[str, int], int] = field(default_factory=dict)
    processes: list[Process] = field(default_factory=list)
    # (service, exit code, its last lines) of every restart.
    restarts: list[tuple[str, int, str]] = field(default_factory=list)
    # How long each process took to stop (``stop_all``).
    stop_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def services(self) -> dict[str, dict[str, Any]]:
        """The compose services by name."""
        return dict(self.compose["services"])

    def volume(self, name: str) -> Path:
        """The folder standing in for a named volume (``.`` is the repository)."""
        if name == ".":
            return ROOT
        folder = self.workdir / "volumes" / name
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def host_port(self, service: str, port: int) -> int:
        """The host port standing in for ``service``'s container port."""
        key = (service, port)
        if key not in self.published:
            self.published[key] = free_port()
        return self.published[key]

    # -- translation ---------------------------------------------------------------

    def _mounts(self, service: dict[str, Any]) -> list[tuple[str, Path]]:
        mounts = []
        for volume in service.get("volumes") or []:
            source, target, *_ = str(volume).split(":")
            mounts.append((target, self.volume(source)))
        # The longest mount point first: /app/sql lies in /app.
        return sorted(mounts, key=lambda m: -len(m[0]))

    def _address(self, match: re.Match[str]) -> str:
        host, port = match.group(1), int(match.group(2))
        if host in self.nats_ports and port == 4222:
            return f"127.0.0.1:{self.nats_ports[host]}"
        return f"127.0.0.1:{self.host_port(host, port)}"

    def translate(self, name: str, service: dict[str, Any], text: str) -> str:
        """One value of a container's environment or command, as this host needs it."""
        if text.startswith("postgresql://"):
            return self._database(text)
        hosts = "|".join(re.escape(h) for h in sorted(self.services, key=len, reverse=True))
        text = re.sub(rf"(?<![\w.-])({hosts}):(\d+)\b", self._address, text)
        text = re.sub(
            r"\b0\.0\.0\.0:(\d+)\b",
            lambda m: f"0.0.0.0:{self.host_port(name, int(m.group(1)))}",
            text,
        )
        for target, folder in self._mounts(service):
            text = re.sub(rf"(?<![\w.]){re.escape(target)}(?=/|$|\s|\")", str(folder), text)
        return text

    def _database(self, url: str) -> str:
        parts = urlsplit(url)
        postgres = self.services.get(parts.hostname or "")
        if postgres is None or parts.port != 5432:
            raise AssertionError(f"{url}: not the compose PostgreSQL service on 5432")
        wanted = postgres["environment"]["POSTGRES_DB"]
        if parts.path != f"/{wanted}":
            raise AssertionError(f"{url}: not the database {wanted} that compose creates")
        local = urlsplit(self.database_url)
        netloc = f"{parts.username}:{parts.password}@{local.hostname}:{local.port or 5432}"
        return urlunsplit((parts.scheme, netloc, local.path, local.query, ""))

    def environment(self, name: str) -> dict[str, str]:
        """The container's environment on this host (its ``MOWDECK_*`` and ``BUS_USER``)."""
        service = self.services[name]
        env = {k: str(v) for k, v in (service.get("environment") or {}).items()}
        bus_user = env.get("BUS_USER")
        if bus_user:
            # The entrypoint: `set -a && . "/nats-auth/$BUS_USER.env"`.
            env_file = Path(self.translate(name, service, f"/nats-auth/{bus_user}.env"))
            for line in env_file.read_text().splitlines():
                key, sep, value = line.partition("=")
                if sep and not key.startswith("#"):
                    env[key.strip()] = value.strip()
        out = {k: self.translate(name, service, v) for k, v in env.items()}
        if "MOWDECK_HTTP_PORT" in out:
            out["MOWDECK_HTTP_PORT"] = str(self.host_port(name, int(env["MOWDECK_HTTP_PORT"])))
        return out

    def argv(self, name: str) -> list[str]:
        """The container's command on this host."""
        service = self.services[name]
        hosts = "|".join(re.escape(h) for h in sorted(self.services, key=len, reverse=True))
        # A bare host name given as an option's value (`--public-host simulator`).
        bare = re.compile(rf"(--[\w-]+[ =])({hosts})(?![\w:.-])")
        return [
            bare.sub(r"\g<1>127.0.0.1", self.translate(name, service, a))
            for a in command_of(service)
        ]

    def readiness_url(self, name: str) -> str:
        """The URL the container's health check reads, as published on this host."""
        test = " ".join(str(t) for t in self.services[name]["healthcheck"]["test"])
        found = re.search(r"http://127\.0\.0\.1:(\d+)(/[\w/]*)", test)
        if found is None:
            raise AssertionError(f"{name}: the health check reads no local URL: {test}")
        return f"http://127.0.0.1:{self.host_port(name, int(found.group(1)))}{found.group(2)}"

    # -- running -------------------------------------------------------------------

    def start(self, name: str) -> Process:
        """Start a container's process with its environment (nothing else of ours).

        Its output goes to ``<name>.log``; a restarted one's to ``<name>.<n>.log``.
        """
        base = {k: v for k, v in os.environ.items() if not k.startswith("MOWDECK_")}
        base["PATH"] = f"{BIN}{os.pathsep}{base.get('PATH', '')}"
        # A process that does not stop is dumped on SIGABRT (``stop``).
        base["PYTHONFAULTHANDLER"] = "1"
        runs = sum(p.name == name for p in self.processes)
        log = self.workdir / (f"{name}.{runs}.log" if runs else f"{name}.log")
        with log.open("wb") as out:
            proc = subprocess.Popen(
                self.argv(name),
                env={**base, **self.environment(name)},
                # working_dir /app: the checkout.
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        process = Process(name, proc, log)
        self.processes.append(process)
        return process

    def run_once(self, name: str, timeout: float = 60.0) -> Process:
        """A one-shot container to its end; ``restart: on-failure`` is honoured."""
        deadline = time.monotonic() + timeout
        while True:
            process = self.start(name)
            code = process.proc.wait(max(1.0, deadline - time.monotonic()))
            if code == 0:
                return process
            if self.services[name].get("restart") != "on-failure" or time.monotonic() > deadline:
                raise AssertionError(f"{name} exited with {code}:\n{process.tail()}")
            time.sleep(1.0)

    def wait_ready(self, process: Process, timeout: float = 90.0) -> Process:
        """Poll the container's health check URL until it answers 200; the process then.

        A process that exits is started again when its ``restart`` policy says so, as
        compose would (each restart is counted in ``restarts``).
        """
        url = self.readiness_url(process.name)
        policy = self.services[process.name].get("restart", "no")
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            code = process.proc.poll()
            if code is not None and (policy == "no" or (policy == "on-failure" and code == 0)):
                raise AssertionError(f"{process.name} exited with {code}:\n{process.tail()}")
            if code is not None:
                self.restarts.append((process.name, code, process.tail(3)))
                time.sleep(1.0)
                process = self.start(process.name)
                continue
            try:
                with urllib.request.urlopen(url, timeout=2) as answer:  # noqa: S310 - local
                    if answer.status == 200:
                        return process
            except urllib.error.HTTPError as err:
                last = f"{err.code} {err.read()[:300]!r}"
            except OSError as err:
                last = str(err)
            time.sleep(0.3)
        restarts = [r for r in self.restarts if r[0] == process.name]
        why = f", restarted {len(restarts)} times, last exit {restarts[-1][1]}" if restarts else ""
        raise AssertionError(f"{process.name} not ready at {url}: {last}{why}\n{process.tail()}")

    def stop_all(self) -> dict[str, int]:
        """Stop every process, the last started first; the exit code of each one's last run."""
        codes: dict[str, int] = {}
        for process in reversed(self.processes):
            started = time.monotonic()
            code = process.stop()
            self.stop_seconds.setdefault(process.name, time.monotonic() - started)
            codes.setdefault(process.name, code)
        return codes
