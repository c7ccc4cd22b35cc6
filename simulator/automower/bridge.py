"""The simulator's virtual mowers speaking Automower Connect, through the stand-in cloud.

Each virtual mower is a mower of one ``StandInCloud`` and, in the ``SimulatorFleet``, a
``Link`` as a device-protocol session is: the fleet's ticker hands it each state when due
(so report intervals, silence and link-loss faults work as for the device protocol); the
bridge turns the state into the mower's attributes and sends the ``*-event-v2`` messages
of the parts that changed, as the vendor's cloud sends deltas. An action or setting the
cloud takes becomes a command the mower's physics carries out, and its next state is
reported at once. The mowers are spread over ``credentials`` application keys: one
account link each in the gateway.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import uuid
from collections.abc import Awaitable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from contracts.v1 import (
    Command,
    Connection,
    MowerRegistration,
    MowerState,
    PauseMow,
    ResumeMow,
    ReturnToDock,
    SetBladeHeight,
    StartMow,
)
from simulator.automower.protocol import (
    ACTION_PARK_UNTIL_FURTHER_NOTICE,
    ACTION_PARK_UNTIL_NEXT_SCHEDULE,
    ACTION_PAUSE,
    ACTION_RESUME_SCHEDULE,
    ACTION_START,
    ACTION_START_IN_WORK_AREA,
)
from simulator.automower.standin import StandInCloud, StandInMower
from simulator.fleet import SimulatorFleet
from simulator.protocol import ProtocolError, StateFrame, decode_device_frame

__all__ = ["AutomowerBridges", "attributes_of"]

RECONNECT_SECONDS = 2.0  # after a link-loss fault, the mower reports again this much later
MODEL = "Automower 450X (simulated)"
TIME_ZONE = "Europe/Berlin"  # the simulated gardens are around Munich
# The simulator's activities as the API's (activity, state).
_AS_API: dict[str, tuple[str, str]] = {
    "idle": ("NOT_APPLICABLE", "IN_OPERATION"),
    "leaving": ("LEAVING", "IN_OPERATION"),
    "mowing": ("MOWING", "IN_OPERATION"),
    "paused": ("MOWING", "PAUSED"),
    "returning": ("GOING_HOME", "IN_OPERATION"),
    "docked": ("PARKED_IN_CS", "RESTRICTED"),
    "charging": ("CHARGING", "IN_OPERATION"),
    "manual": ("NOT_APPLICABLE", "IN_OPERATION"),
    "stopped": ("STOPPED_IN_GARDEN", "STOPPED"),
    "error": ("NOT_APPLICABLE", "ERROR"),
}
# The simulator's error codes as the vendor's numbers (docs/adapters.md).
_ERRORS = {
    "stuck": 9,  # Trapped
    "lifted": 71,  # Alarm! Mower lifted
    "battery_empty": 12,  # Empty battery
    "outside_area": 1,  # Outside working area
    "blade_jammed": 24,  # Cutting system blocked
}
_LEVEL_BASE_MM, _LEVEL_STEP_MM = 20, 5  # as the gateway's mapping: level 1 is 20 mm
_WALL_EPOCH = datetime(1970, 1, 1)  # noqa: DTZ001 - the mower's wall clock's origin


def wall_ms(at: datetime, zone: str = TIME_ZONE) -> int:
    """``at`` as the mower reports times: milliseconds of its wall clock in ``zone``."""
    wall = at.astimezone(ZoneInfo(zone)).replace(tzinfo=None)
    return (wall - _WALL_EPOCH) // timedelta(milliseconds=1)


def _level(height_mm: int | None) -> int:
    if height_mm is None:
        return 4
    return max(1, min(9, round((height_mm - _LEVEL_BASE_MM) / _LEVEL_STEP_MM) + 1))


def attributes_of(state: MowerState) -> dict[str, object]:
    """The parts of the API's attributes a simulated state reports."""
    activity, api_state = _AS_API.get(state.activity, ("NOT_APPLICABLE", "IN_OPERATION"))
    code = 0
    if state.activity == "error":
        code = _ERRORS.get(state.error_code or "", 0)
    parts: dict[str, object] = {
        "mower": {
            "mode": "MAIN_AREA",
            "activity": activity,
            "inactiveReason": "NONE",
            "state": api_state,
            "errorCode": code,
            "errorCodeTimestamp": 0,
            "isErrorConfirmable": False,
        },
        "battery": {"batteryPercent": state.battery},
        "cuttingHeight": {"height": _level(state.blade_height_mm)},
    }
    if state.position is not None:
        parts["position"] = {"latitude": state.position.lat, "longitude": state.position.lon}
    return parts


_EVENT_TYPES = {
    "mower": "mower-event-v2",
    "battery": "battery-event-v2",
    "position": "position-event-v2",
    "cuttingHeight": "cuttingHeight-event-v2",
}


class _Bridged(StandInMower):
    """A mower of the stand-in cloud whose actions move a virtual mower."""

    bridge: _Bridge

    def act(self, kind: str, attributes: dict[str, object]) -> Awaitable[None] | None:
        command: Command | None = None
        if kind == ACTION_START:
            duration = attributes.get("duration")
            command = StartMow(duration_min=duration if isinstance(duration, int) else None)
        elif kind == ACTION_START_IN_WORK_AREA:
            command = StartMow()  # the simulated garden is one area
        elif kind == ACTION_PAUSE:
            command = PauseMow()
        elif kind == ACTION_RESUME_SCHEDULE:
            command = ResumeMow()
        elif kind in (ACTION_PARK_UNTIL_NEXT_SCHEDULE, ACTION_PARK_UNTIL_FURTHER_NOTICE):
            command = ReturnToDock()
        return self.bridge.execute(command) if command is not None else None

    def set_cutting_height(self, level: int) -> Awaitable[None] | None:
        return self.bridge.execute(
            SetBladeHeight(height_mm=_LEVEL_BASE_MM + _LEVEL_STEP_MM * (level - 1))
        )


class _Bridge:
    """One mower's link: its states as the cloud's events, the cloud's actions in."""

    def __init__(self, bridges: AutomowerBridges, i: int, credential: str) -> None:
        self.bridges, self.i, self.credential = bridges, i, credential
        virtual = bridges.fleet.mowers[i]
        owner = bridges.logins[credential][0]
        self.mower = _Bridged(str(virtual.mower_id), model=MODEL, name=virtual.name, owner=owner)
        self.mower.bridge = self
        self.reported: dict[str, object] = {}  # the parts last sent
        self.up = False
        self.task: asyncio.Task[None] | None = None

    def writable(self) -> bool:
        return self.up

    async def send(self, data: bytes) -> None:
        """A device-protocol frame from the fleet: a state goes out as the changed parts."""
        try:
            frame = decode_device_frame(data)
        except ProtocolError:
            return
        if not isinstance(frame, StateFrame):
            return
        parts = attributes_of(frame.state)
        self._stamp(parts, frame.state.observed_at)
        self._keep(parts)
        changed: list[dict[str, object]] = [
            {"id": self.mower.id, "type": _EVENT_TYPES[name], "attributes": {name: part}}
            for name, part in parts.items()
            if self.reported.get(name) != part
        ]
        self.reported = parts
        if changed:
            await self.bridges.cloud.send_events(changed)

    def _stamp(self, parts: dict[str, object], at: datetime) -> None:
        # An error keeps the mower-local time it began at, as the vendor's errorCodeTimestamp.
        mower, before = parts["mower"], self.reported.get("mower")
        assert isinstance(mower, dict)
        if not mower["errorCode"]:
            return
        kept = None
        if isinstance(before, dict) and before.get("errorCode") == mower["errorCode"]:
            kept = before.get("errorCodeTimestamp")
        mower["errorCodeTimestamp"] = kept if kept is not None else wall_ms(at)

    def _keep(self, parts: dict[str, object]) -> None:
        # What GET /mowers answers after a reconnect: the latest state.
        m, part = self.mower, parts["mower"]
        assert isinstance(part, dict)
        m.activity, m.state, m.error_code = part["activity"], part["state"], part["errorCode"]
        battery = parts["battery"]
        assert isinstance(battery, dict)
        m.battery = battery["batteryPercent"]
        position = parts.get("position")
        if isinstance(position, dict):
            m.lat, m.lon = position["latitude"], position["longitude"]
        height = parts["cuttingHeight"]
        assert isinstance(height, dict)
        m.cutting_height = height["height"]

    async def execute(self, command: Command) -> None:
        """Carry out a command from the cloud and report the state it led to."""
        fleet = self.bridges.fleet
        fleet.mowers[self.i].execute(command, fleet.clock.now())
        await fleet.report(self.i)

    async def drop(self, reason: str) -> None:  # noqa: ARG002 - the Link protocol's
        """A link-loss fault: the cloud hears nothing of the mower for a while."""
        if self.bridges.stopping:
            return
        self.up = False
        self.mower.connected = False
        self.bridges.fleet.detach(self.i, self)
        self.task = asyncio.create_task(self._back())

    async def _back(self) -> None:
        await asyncio.sleep(RECONNECT_SECONDS)
        self.attach()

    def attach(self) -> None:
        """Report the mower's state as it is now (what ``GET /mowers`` answers), then
        every change."""
        fleet = self.bridges.fleet
        virtual = fleet.mowers[self.i]
        virtual.advance(fleet.clock.now())
        self.reported = attributes_of(virtual.state(datetime.now(UTC)))
        self._keep(self.reported)
        self.up, self.mower.connected = True, True
        fleet.attach(self.i, self)


class AutomowerBridges:
    """The mowers of ``fleet`` (those at ``indices``, else all) in one stand-in cloud, over
    ``credentials`` keys."""

    def __init__(
        self,
        fleet: SimulatorFleet,
        *,
        credentials: int = 1,
        host: str = "127.0.0.1",
        port: int = 0,
        rate: float = 1.0,
        indices: Sequence[int] | None = None,
    ) -> None:
        self.fleet = fleet
        chosen = list(range(len(fleet.mowers)) if indices is None else indices)
        n = max(1, min(credentials, len(chosen) or 1))
        # The application keys: name -> (client id, client secret).
        self.logins = {
            f"sim-automower-{k + 1}": (
                f"sim-app-{k + 1}-{secrets.token_hex(4)}",
                secrets.token_hex(16),
            )
            for k in range(n)
        }
        names = list(self.logins)
        self.cloud = StandInCloud(dict(self.logins.values()), rate=rate, host=host, port=port)
        self.bridges = [_Bridge(self, i, names[k % n]) for k, i in enumerate(chosen)]
        for bridge in self.bridges:
            self.cloud.add(bridge.mower)
        self.stopping = False

    async def start(self) -> None:
        """Serve the cloud and attach every mower (``OSError`` when it cannot listen)."""
        await self.cloud.start()
        for bridge in self.bridges:
            bridge.attach()

    async def stop(self) -> None:
        """Detach every mower and stop the cloud."""
        self.stopping = True
        for bridge in self.bridges:
            if bridge.task is not None:
                bridge.task.cancel()
            self.fleet.detach(bridge.i, bridge)
        await self.cloud.stop()

    @property
    def endpoints(self) -> dict[str, str]:
        """The cloud's URLs by the gateway's settings (``MOWDECK_AUTOMOWER_*``)."""
        e = self.cloud.endpoints
        return {
            "MOWDECK_AUTOMOWER_TOKEN_URL": e["token_url"],
            "MOWDECK_AUTOMOWER_API_URL": e["api_url"],
            "MOWDECK_AUTOMOWER_WS_URL": e["ws_url"],
        }

    def write_credentials(self, folder: Path) -> list[Path]:
        """Each key as ``<name>.json`` in ``folder`` (``MOWDECK_GATEWAY_CREDENTIALS_DIR``)."""
        folder.mkdir(parents=True, exist_ok=True)
        written = []
        for name, (client_id, secret) in self.logins.items():
            path = folder / f"{name}.json"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump({"client_id": client_id, "client_secret": secret}, f)
            written.append(path)
        return written

    def registrations(self, *, time_zone: str | None = TIME_ZONE) -> list[MowerRegistration]:
        """The mowers as connections of kind ``automower``."""
        out = []
        for bridge in self.bridges:
            mower = self.fleet.mowers[bridge.i]
            options: dict[str, object] = {
                "vendor_id": bridge.mower.id,
                "credentials": bridge.credential,
            }
            if time_zone is not None:
                options["time_zone"] = time_zone
            out.append(
                MowerRegistration(
                    mower_id=mower.mower_id,
                    account_id=mower.account_id,
                    name=mower.name,
                    connection=Connection(kind="automower", options=options),
                )
            )
        return out

    def mower_ids(self) -> list[uuid.UUID]:
        """The bridged mowers' ids, in fleet order."""
        return [self.fleet.mowers[b.i].mower_id for b in self.bridges]
