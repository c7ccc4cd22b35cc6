"""The demo's mixed-brand fleet: some simulated mowers speak OpenMower or Automower Connect.

The simulator's mowers are split by position: the first speak Mowdeck's device protocol
(the demo's scenario tells its stories with them), the next ``openmower`` publish on an
MQTT broker as OpenMowers, the last ``automower`` are mowers of a stand-in Automower
Connect cloud. The broker is the one ``MOWDECK_DEMO_MQTT_BROKER`` names, else a Mosquitto
the demo starts on a free port; without a ``mosquitto`` binary the demo says so and those
mowers speak Mowdeck's protocol instead. Every brand's endpoint is added to the device
hosts, so the gateway and Fleet may dial it and nothing else of the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import yarl

from contracts.v1 import MowerRegistration
from mowdeck.kit.ports import free_port
from simulator.automower.bridge import AutomowerBridges
from simulator.fleet import SimulatorFleet
from simulator.openmower.bridge import OpenMowerBridges

__all__ = ["BRANDS", "Brands", "Mosquitto", "brand_counts", "mosquitto_binary", "plan_brands"]

BRANDS = {"simulator": "Mowdeck", "openmower": "OpenMower", "automower": "Husqvarna Automower"}
_PLACES = ("/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto")


def mosquitto_binary() -> str | None:
    """The ``mosquitto`` binary (Debian's package), if installed."""
    return shutil.which("mosquitto") or next((p for p in _PLACES if Path(p).exists()), None)


class Mosquitto:
    """A broker for the demo on ``host``, anonymous, nothing kept on disk."""

    def __init__(self, binary: str, folder: Path, host: str) -> None:
        self.binary, self.folder, self.host = binary, folder, host
        self.port = free_port(host)
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"mqtt://{self.host}:{self.port}"

    async def start(self) -> None:
        """Start it and wait until it accepts connections (``RuntimeError`` if it exits)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        lines = [f"listener {self.port} {self.host}", "persistence false", "allow_anonymous true"]
        if os.geteuid() == 0:
            lines.append("user root")  # it would drop to "mosquitto", who cannot read the file
        config = self.folder / "mosquitto.conf"
        config.write_text("\n".join(lines) + "\n")
        self._process = subprocess.Popen(  # noqa: ASYNC220, S603 - started once; the binary is the system's
            [self.binary, "-c", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        for _ in range(200):
            try:
                _, writer = await asyncio.open_connection(self.host, self.port)
            except OSError:
                if self._process.poll() is not None:
                    err = self._process.stderr.read().decode() if self._process.stderr else ""
                    raise RuntimeError(f"mosquitto exited: {err.strip()}") from None
                await asyncio.sleep(0.025)
            else:
                writer.close()
                return
        raise RuntimeError("mosquitto did not listen within 5 s")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(5)
            if self._process.poll() is None:
                self._process.kill()
                self._process.wait()
        if self._process is not None and self._process.stderr is not None:
            self._process.stderr.close()


MIXED_FROM = 10  # a fleet this large is mixed by default: 3 OpenMower, 3 Automower
MIXED_EACH = 3


def brand_counts(total: int, openmower: int | None, automower: int | None) -> tuple[int, int]:
    """How many OpenMower and Automower mowers: as asked, else 3 each of 10 or more."""
    default = MIXED_EACH if total >= MIXED_FROM else 0
    return (default if openmower is None else openmower), (
        default if automower is None else automower
    )


def plan_brands(total: int, openmower: int, automower: int) -> tuple[range, range, range]:
    """The mowers' positions by brand: Mowdeck first, then OpenMower, then Automower."""
    automower = max(0, min(automower, total))
    openmower = max(0, min(openmower, total - automower))
    own = total - openmower - automower
    return range(own), range(own, own + openmower), range(own + openmower, total)


@dataclass
class Brands:
    """What runs for the mowers of other brands, and how the demo's services reach it."""

    host: str
    state_dir: Path
    openmower_wanted: int = 0
    broker: str = ""  # mqtt://host:port, empty: no OpenMower mowers
    broker_note: str = ""  # why there is no broker, for the banner
    openmower: OpenMowerBridges | None = None
    automower: AutomowerBridges | None = None
    cloud_port: int = 0
    mosquitto: Mosquitto | None = None
    kinds: dict[str, str] = field(default_factory=dict)  # mower id -> connection kind

    async def open_broker(self, stack: contextlib.AsyncExitStack) -> None:
        """The broker for the OpenMower mowers: configured, started, or none (say why)."""
        if self.openmower_wanted <= 0:
            return
        configured = os.environ.get("MOWDECK_DEMO_MQTT_BROKER")
        if configured:
            self.broker = configured
            return
        binary = mosquitto_binary()
        if binary is None:
            self.broker_note = (
                f"no mosquitto binary (apt-get install mosquitto, or set "
                f"MOWDECK_DEMO_MQTT_BROKER): the {self.openmower_wanted} OpenMower mowers "
                "speak Mowdeck's protocol instead"
            )
            return
        broker = Mosquitto(binary, self.state_dir / "mosquitto", self.host)
        stack.callback(broker.stop)
        await broker.start()
        self.mosquitto, self.broker = broker, broker.url

    def device_hosts(self) -> list[str]:
        """The broker's and the cloud's host and port, for the device-host allow-list."""
        out = []
        if self.broker:
            url = yarl.URL(self.broker)
            out.append(f"{url.host}:{url.port}")
        if self.cloud_port:
            out.append(f"{self.host}:{self.cloud_port}")
        return out

    def gateway_settings(self) -> dict[str, str]:
        """The gateway's Automower settings: the stand-in cloud and its keys."""
        if not self.cloud_port:
            return {}
        base = f"http://{self.host}:{self.cloud_port}"
        return {
            "automower_token_url": f"{base}/auth/v1/oauth2/token",
            "automower_api_url": f"{base}/api/v1",
            "automower_ws_url": f"ws://{self.host}:{self.cloud_port}/ws/v1",
            "gateway_credentials_dir": str(self.state_dir / "credentials"),
        }

    async def start(
        self, fleet: SimulatorFleet, stack: contextlib.AsyncExitStack, plan: tuple[range, ...]
    ) -> None:
        """Bridge the OpenMower and Automower mowers (the simulator runs already)."""
        _, openmower, automower = plan
        if self.broker and openmower:
            url = yarl.URL(self.broker)
            self.openmower = OpenMowerBridges(fleet, url.host or "", url.port or 1883, openmower)
            stack.push_async_callback(self.openmower.stop)
            await self.openmower.start()
        if automower:
            self.automower = AutomowerBridges(
                fleet, host=self.host, port=self.cloud_port, indices=automower
            )
            stack.push_async_callback(self.automower.stop)
            await self.automower.start()
            self.automower.write_credentials(self.state_dir / "credentials")

    def registrations(self, own: list[MowerRegistration]) -> list[MowerRegistration]:
        """``own`` (the simulator's, every mower) with the bridged mowers' in their place."""
        bridged: dict[object, MowerRegistration] = {}
        if self.openmower is not None:
            bridged |= {r.mower_id: r for r in self.openmower.registrations(self.broker)}
        if self.automower is not None:
            bridged |= {r.mower_id: r for r in self.automower.registrations()}
        out = [bridged.get(r.mower_id, r) for r in own]
        self.kinds = {str(r.mower_id): r.connection.kind for r in out}
        return out

    def counts(self) -> dict[str, int]:
        """How many mowers of each brand."""
        found: dict[str, int] = {}
        for kind in self.kinds.values():
            found[BRANDS.get(kind, kind)] = found.get(BRANDS.get(kind, kind), 0) + 1
        return found
