"""A stand-in OpenMower: publishes what xbot_monitoring publishes and obeys its actions.

It connects to a real MQTT broker, publishes retained ``actions/json`` and ``map/json``
and a ``robot_state/json`` stream under its prefix, and reacts to ``action`` and
``teleop`` as mower_logic's behaviours do (start undocks then mows; pause and continue
while mowing; abort mowing docks; aborting docking idles). Its pose moves on a circle
while mowing and with the teleop velocity otherwise. Knobs for tests: ``emergency``
latches the emergency flag, ``silent`` stops the state stream (a mower gone without a
last will), ``deaf`` ignores actions, ``disabled`` keeps actions off in ``actions/json``.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import deque

import aiomqtt
import msgspec

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

__all__ = ["StandInOpenMower"]

_UNDOCK_SECONDS = 0.3
_DOCK_SECONDS = 0.6
# Which actions mower_logic enables in which state (its behaviours' ``update_actions``).
_ENABLED: dict[str, frozenset[str]] = {
    "IDLE": frozenset({ACTION_START}),
    "UNDOCKING": frozenset(),
    "MOWING": frozenset({ACTION_PAUSE, ACTION_ABORT_MOWING}),
    "PAUSED": frozenset({ACTION_CONTINUE, ACTION_ABORT_MOWING}),
    "DOCKING": frozenset({ACTION_ABORT_DOCKING}),
}
_ALL = (ACTION_START, ACTION_PAUSE, ACTION_CONTINUE, ACTION_ABORT_MOWING, ACTION_ABORT_DOCKING)


class StandInOpenMower:
    """One OpenMower on ``host:port`` under ``prefix``, publishing every ``period`` s."""

    def __init__(self, host: str, port: int, *, prefix: str = "", period: float = 0.1) -> None:
        self.host, self.port, self.period = host, port, period
        self.topics = Topics(prefix)
        self.state = "IDLE"
        self.battery = 0.9
        self.charging = True
        self.emergency = False
        self.rain = False
        self.x, self.y, self.heading = 0.0, 0.0, 0.0
        self.vx = self.vz = 0.0
        self.silent = False
        self.deaf = False
        self.disabled: set[str] = set()
        self.login: tuple[str, str] | None = None  # the broker's username and password
        # What came in, the newest last (bounded: a simulator runs for days).
        self.actions_received: deque[str] = deque(maxlen=256)
        self.teleops: deque[tuple[float, float]] = deque(maxlen=256)
        self._client: aiomqtt.Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._t = 0.0

    async def start(self) -> None:
        """Connect, publish the retained topics and start the state stream."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._run(ready), name="openmower-standin")
        # Ready, or the connect's error: whichever comes first.
        await asyncio.wait({ready, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if not ready.done():
            ready.cancel()
            self._task.result()  # raises what ended it (aiomqtt.MqttError)

    async def stop(self) -> None:
        """Stop publishing and disconnect."""
        if self._timer is not None:
            self._timer.cancel()
        if self._task is not None:
            self._task.cancel()
            # A stand-in whose connect failed has reported it from ``start`` already.
            with contextlib.suppress(asyncio.CancelledError, aiomqtt.MqttError):
                await self._task

    def enabled_actions(self) -> frozenset[str]:
        """The actions enabled now."""
        if self.emergency:
            return frozenset()
        return _ENABLED.get(self.state, frozenset()) - self.disabled

    async def publish_actions(self) -> None:
        """Publish ``actions/json`` (retained), as mower_logic does on every change."""
        if self._client is None:
            return
        enabled = self.enabled_actions()
        body = [
            {"action_id": a, "action_name": a.rsplit("/", 1)[-1], "enabled": a in enabled}
            for a in _ALL
        ]
        await self._client.publish(
            self.topics.actions, msgspec.json.encode(body), qos=1, retain=True
        )

    async def _run(self, ready: asyncio.Future[None]) -> None:
        user, password = self.login or (None, None)
        async with aiomqtt.Client(self.host, self.port, username=user, password=password) as client:
            self._client = client
            await client.subscribe(self.topics.action, qos=1)
            await client.subscribe(self.topics.teleop, qos=0)
            mapping = {
                "areas": [
                    {
                        "id": "a1",
                        "properties": {"name": "Lawn", "type": "mow"},
                        "outline": [
                            {"x": -10, "y": -10},
                            {"x": 10, "y": -10},
                            {"x": 10, "y": 10},
                            {"x": -10, "y": 10},
                        ],
                    }
                ],
                "docking_stations": [
                    {
                        "id": "d1",
                        "properties": {"name": "Dock"},
                        "position": {"x": 0.0, "y": 0.0},
                        "heading": 0.0,
                    }
                ],
            }
            await client.publish(self.topics.map, msgspec.json.encode(mapping), qos=1, retain=True)
            await self.publish_actions()
            ticker = asyncio.create_task(self._tick(client))
            ready.set_result(None)
            try:
                async for message in client.messages:
                    await self._on(message)
            finally:
                ticker.cancel()
                self._client = None

    async def _on(self, message: aiomqtt.Message) -> None:
        payload = message.payload if isinstance(message.payload, bytes) else b""
        if message.topic.matches(self.topics.teleop):
            with contextlib.suppress(ProtocolError):
                drive = decode_teleop(payload)
                self.vx, self.vz = float(drive["vx"]), float(drive["vz"])
                self.teleops.append((self.vx, self.vz))
            return
        action = payload.decode(errors="replace")
        self.actions_received.append(action)
        if not self.deaf:
            await self.obey(action)

    async def obey(self, action: str) -> None:
        """Carry out ``action`` as mower_logic would, if its behaviour offers it now."""
        if action not in self.enabled_actions():
            return  # mower_logic ignores an action its current behaviour does not offer
        if action == ACTION_START:
            await self._enter("UNDOCKING")
            self._later(_UNDOCK_SECONDS, "MOWING")
        elif action == ACTION_PAUSE:
            await self._enter("PAUSED")
        elif action == ACTION_CONTINUE:
            await self._enter("MOWING")
        elif action == ACTION_ABORT_MOWING:
            await self._enter("DOCKING")
            self._later(_DOCK_SECONDS, "IDLE")
        elif action == ACTION_ABORT_DOCKING:
            await self._enter("IDLE")

    def _later(self, delay: float, state: str) -> None:
        if self._timer is not None:
            self._timer.cancel()
        before = self.state

        def go() -> None:
            if self.state == before:
                asyncio.get_running_loop().create_task(self._enter(state))

        self._timer = asyncio.get_running_loop().call_later(delay, go)

    async def _enter(self, state: str) -> None:
        self.state = state
        self.charging = state == "IDLE"
        await self.publish_actions()

    async def set_emergency(self, on: bool) -> None:
        """Latch (or reset) the emergency flag, as the stop button or a lift does."""
        self.emergency = on
        if on and self.state in ("MOWING", "UNDOCKING"):
            self.state = "PAUSED"
        await self.publish_actions()

    async def _tick(self, client: aiomqtt.Client) -> None:
        while True:
            await asyncio.sleep(self.period)
            self._move(self.period)
            if self.silent:
                continue
            await client.publish(self.topics.robot_state, msgspec.json.encode(self.robot_state()))

    def _move(self, dt: float) -> None:
        self._t += dt
        if self.state == "MOWING" and not self.emergency:
            self.x, self.y = 5 * math.cos(self._t / 5), 5 * math.sin(self._t / 5)
            self.heading = (self._t / 5 + math.pi / 2) % (2 * math.pi)
            self.battery = max(0.0, self.battery - dt / 3600)
        elif not self.emergency and (self.vx or self.vz):
            self.heading = (self.heading + self.vz * dt) % (2 * math.pi)
            self.x += self.vx * dt * math.cos(self.heading)
            self.y += self.vx * dt * math.sin(self.heading)
        if self.charging:
            self.battery = min(1.0, self.battery + dt / 3600)

    def robot_state(self) -> dict[str, object]:
        """The ``robot_state/json`` body xbot_monitoring would publish now."""
        return {
            "battery_percentage": round(self.battery, 4),
            "gps_percentage": 1.0,
            "current_action_progress": 0.0,
            "current_state": self.state,
            "current_sub_state": "",
            "current_area": 0 if self.state == "MOWING" else -1,
            "current_path": 0,
            "current_path_index": 0,
            "emergency": self.emergency,
            "is_charging": self.charging,
            "rain_detected": self.rain,
            "pose": {
                "x": self.x,
                "y": self.y,
                "heading": self.heading,
                "pos_accuracy": 0.02,
                "heading_accuracy": 0.01,
                "heading_valid": 1,
            },
        }
