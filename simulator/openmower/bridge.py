"""The simulator's virtual mowers speaking OpenMower: one MQTT bridge per mower.

A bridge is the mower's ``Link`` in the ``SimulatorFleet``, as a device-protocol session
is: the fleet's ticker hands it each state when due (so report intervals, silence and
link-loss faults work as for the device protocol), and the bridge publishes it as
``robot_state/json`` with the ``actions/json`` mower_logic would offer in that state. An
``action`` or ``teleop`` from the broker becomes a command the mower's physics carries
out. Positions go out as metres east and north of the mower's garden base, the datum of
its registration.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import uuid
from collections.abc import Sequence
from typing import Any

import aiomqtt
import msgspec

from contracts.v1 import (
    Command,
    Connection,
    ManualDrive,
    MowerRegistration,
    MowerState,
    PauseMow,
    ResumeMow,
    ReturnToDock,
    StartMow,
)
from simulator.fleet import SimulatorFleet
from simulator.openmower.protocol import (
    ACTION_ABORT_DOCKING,
    ACTION_ABORT_MOWING,
    ACTION_CONTINUE,
    ACTION_PAUSE,
    ACTION_START,
    ProtocolError,
    Topics,
    decode_teleop,
)
from simulator.protocol import ProtocolError as DeviceProtocolError
from simulator.protocol import StateFrame, decode_device_frame

__all__ = ["OpenMowerBridges", "robot_state"]

METRES_PER_DEGREE = 6_378_137.0 * math.pi / 180.0  # as the gateway's adapter converts
RECONNECT_SECONDS = 2.0  # after a link-loss fault, the bridge comes back this much later
_STATES = {
    "idle": "IDLE", "docked": "IDLE", "charging": "IDLE", "leaving": "UNDOCKING",
    "mowing": "MOWING", "paused": "PAUSED", "returning": "DOCKING", "manual": "IDLE",
    "stopped": "IDLE", "error": "IDLE",
}  # fmt: skip
_OFFERED = {
    "IDLE": (ACTION_START,),
    "MOWING": (ACTION_PAUSE, ACTION_ABORT_MOWING),
    "PAUSED": (ACTION_CONTINUE, ACTION_ABORT_MOWING),
    "DOCKING": (ACTION_ABORT_DOCKING,),
}
_ALL = (ACTION_START, ACTION_PAUSE, ACTION_CONTINUE, ACTION_ABORT_MOWING, ACTION_ABORT_DOCKING)
_COMMANDS: dict[str, Command] = {
    ACTION_START: StartMow(),
    ACTION_PAUSE: PauseMow(),
    ACTION_CONTINUE: ResumeMow(),
    ACTION_ABORT_MOWING: ReturnToDock(),
    ACTION_ABORT_DOCKING: PauseMow(),
}


def robot_state(state: MowerState, datum: tuple[float, float]) -> dict[str, Any]:
    """``state`` as xbot_monitoring's ``robot_state/json``, positions relative to ``datum``."""
    current = _STATES.get(state.activity, "IDLE")
    # The emergency latch: a stop, or an error the mower cannot mow on with.
    emergency = state.activity in ("stopped", "error")
    pose: dict[str, Any] = {"x": 0.0, "y": 0.0, "heading": 0.0, "pos_accuracy": 99.0,
                            "heading_accuracy": 1.0, "heading_valid": 0}  # fmt: skip
    if state.position is not None:
        lat0, lon0 = datum
        pose["y"] = (state.position.lat - lat0) * METRES_PER_DEGREE
        pose["x"] = (state.position.lon - lon0) * METRES_PER_DEGREE * math.cos(math.radians(lat0))
        if state.position.heading_deg is not None:
            pose["heading"] = math.radians(90.0 - state.position.heading_deg)
            pose["heading_valid"] = 1
        pose["pos_accuracy"] = {"fixed": 0.02, "float": 0.3, "single": 2.0}.get(state.rtk_fix, 99.0)
    return {
        "battery_percentage": state.battery / 100.0,
        "gps_percentage": 0.0 if state.rtk_fix == "none" else 1.0,
        "current_action_progress": float(state.raw.get("progress_pct", 0.0)) / 100.0,
        "current_state": current,
        "current_sub_state": "",
        "current_area": 0 if current == "MOWING" else -1,
        "current_path": -1,
        "current_path_index": -1,
        "emergency": emergency,
        "is_charging": state.charging,
        "rain_detected": False,
        "pose": pose,
    }


class _Bridge:
    """One mower's link: states out on MQTT, actions and teleop in."""

    def __init__(self, bridges: OpenMowerBridges, i: int) -> None:
        self.bridges, self.i = bridges, i
        mower = bridges.fleet.mowers[i]
        self.datum = (mower.garden.base_lat, mower.garden.base_lon)
        self.topics = Topics(f"mowdeck-sim/{mower.mower_id}/")
        self.client: aiomqtt.Client | None = None
        self.offered: tuple[str, ...] | None = None
        self.task: asyncio.Task[None] | None = None

    def writable(self) -> bool:
        return self.client is not None

    async def send(self, data: bytes) -> None:
        """A device-protocol frame from the fleet: a state goes out as robot_state."""
        client = self.client
        try:
            frame = decode_device_frame(data)
        except DeviceProtocolError:
            return
        if client is None or not isinstance(frame, StateFrame):
            return
        body = robot_state(frame.state, self.datum)
        with contextlib.suppress(aiomqtt.MqttError):
            await self._offer(client, body)
            await client.publish(self.topics.robot_state, msgspec.json.encode(body))

    async def drop(self, reason: str) -> None:  # noqa: ARG002 - the Link protocol's
        """A link-loss fault: disconnect, and come back a little later."""
        if self.bridges.stopping:
            return
        if self.task is not None:
            self.task.cancel()
        self.bridges.fleet.detach(self.i, self)
        self.task = asyncio.create_task(self.run(delay=RECONNECT_SECONDS))

    async def _offer(self, client: aiomqtt.Client, body: dict[str, Any]) -> None:
        offered = () if body["emergency"] else _OFFERED.get(body["current_state"], ())
        if offered != self.offered:
            self.offered = offered
            actions = [{"action_id": a, "action_name": a.rsplit("/", 1)[-1],
                        "enabled": a in offered} for a in _ALL]  # fmt: skip
            await client.publish(self.topics.actions, msgspec.json.encode(actions), qos=1,
                                 retain=True)  # fmt: skip

    async def run(self, delay: float = 0.0) -> None:
        """Connect (again) and serve until cancelled."""
        await asyncio.sleep(delay)
        b = self.bridges
        while True:
            try:
                async with aiomqtt.Client(b.host, b.port) as client:
                    await client.subscribe(self.topics.action, qos=1)
                    await client.subscribe(self.topics.teleop, qos=0)
                    self.client, self.offered = client, None
                    b.fleet.attach(self.i, self)
                    b.connected()
                    async for message in client.messages:
                        await self._on(message)
            except aiomqtt.MqttError as err:
                b.failed(err)
                await asyncio.sleep(RECONNECT_SECONDS)
            finally:
                self.client = None
                b.fleet.detach(self.i, self)

    async def _on(self, message: aiomqtt.Message) -> None:
        payload = message.payload if isinstance(message.payload, bytes) else b""
        command: Command | None
        if message.topic.matches(self.topics.teleop):
            try:
                drive = decode_teleop(payload)
            except ProtocolError:
                return
            command = ManualDrive(
                linear_mps=max(-1.0, min(1.0, float(drive.get("vx", 0.0)))),
                angular_rps=max(-2.0, min(2.0, float(drive.get("vz", 0.0)))),
                ttl_ms=500,
            )
        else:
            action = payload.decode(errors="replace")
            if action not in (self.offered or ()):
                return  # as mower_logic: an action the behaviour does not offer is ignored
            command = _COMMANDS.get(action)
        if command is not None:
            fleet = self.bridges.fleet
            fleet.mowers[self.i].execute(command, fleet.clock.now())
            await fleet.report(self.i)


class OpenMowerBridges:
    """The mowers of ``fleet`` (those at ``indices``, else all) on the broker ``host:port``."""

    def __init__(
        self, fleet: SimulatorFleet, host: str, port: int, indices: Sequence[int] | None = None
    ) -> None:
        self.fleet, self.host, self.port = fleet, host, port
        chosen = range(len(fleet.mowers)) if indices is None else indices
        self.bridges = [_Bridge(self, i) for i in chosen]
        self.stopping = False
        self._all_up = asyncio.Event()
        self._error: aiomqtt.MqttError | None = None
        self._failing = asyncio.Event()

    def failed(self, err: aiomqtt.MqttError) -> None:
        """A bridge could not connect: ``start`` gives up at once rather than wait."""
        self._error = err
        self._failing.set()

    def connected(self) -> None:
        """A bridge connected: wake ``start`` once all have."""
        if all(b.client is not None for b in self.bridges):
            self._all_up.set()

    async def start(self, timeout: float = 10.0) -> None:
        """Connect every bridge; ``ConnectionError`` (an ``OSError``) when one cannot, and
        ``TimeoutError`` when they are not all connected within ``timeout``."""
        for bridge in self.bridges:
            bridge.task = asyncio.create_task(bridge.run())
        up = asyncio.ensure_future(self._all_up.wait())
        failing = asyncio.ensure_future(self._failing.wait())
        try:
            await asyncio.wait({up, failing}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            up.cancel()
            failing.cancel()
        if self._all_up.is_set():
            return
        await self.stop()
        if self._error is not None:
            raise ConnectionError(str(self._error))
        raise TimeoutError

    async def stop(self) -> None:
        """Disconnect every bridge."""
        self.stopping = True
        tasks = [b.task for b in self.bridges if b.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def registrations(self, broker: str) -> list[MowerRegistration]:
        """The mowers as connections of kind ``openmower`` on ``broker``."""
        out = []
        for bridge in self.bridges:
            mower = self.fleet.mowers[bridge.i]
            lat, lon = bridge.datum
            out.append(
                MowerRegistration(
                    mower_id=mower.mower_id,
                    account_id=mower.account_id,
                    name=mower.name,
                    connection=Connection(
                        kind="openmower",
                        options={"broker": broker, "prefix": bridge.topics.prefix,
                                 "datum": {"lat": lat, "lon": lon}},
                    ),
                )
            )  # fmt: skip
        return out

    def mower_ids(self) -> list[uuid.UUID]:
        """The bridged mowers' ids, in fleet order."""
        return [self.fleet.mowers[b.i].mower_id for b in self.bridges]
