"""OpenMower's MQTT messages as open_mower_ros's ``xbot_monitoring`` node publishes them.

Read from its source (``xbot_monitoring.cpp``, ``mower_logic``'s behaviours), see
docs/adapters.md for the exact references:

- ``robot_state/json``, not retained, each time mower_logic publishes its state: battery
  and GPS quality as fractions 0..1, ``current_state`` (``IDLE``, ``UNDOCKING``,
  ``MOWING``, ``PAUSED``, ``DOCKING``, ``AREA_RECORDING``), ``current_sub_state``,
  ``current_area``, ``current_path``, ``current_path_index``, ``current_action_progress``,
  ``emergency``, ``is_charging``, ``rain_detected`` and ``pose`` (``x``/``y`` in metres
  east/north of the map's origin, ``heading`` in radians counter-clockwise from east,
  ``pos_accuracy`` in metres, ``heading_accuracy``, ``heading_valid``).
- ``actions/json``, retained: a list of ``{action_id, action_name, enabled}``, action ids
  ``<node prefix>/<id>`` such as ``mower_logic:idle/start_mowing``.
- ``map/json``, retained: areas with outlines in local metres and the docking pose.
- ``action`` (to the mower): an action id as plain text. ``teleop``: BSON ``{vx, vz}``.

Nothing carries a command id, an acknowledgement or a timestamp; the broker gets no last
will. Every topic is under the mower's prefix (empty, or ending in ``/``).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any

import msgspec

__all__ = [
    "ACTION_ABORT_DOCKING",
    "ACTION_ABORT_MOWING",
    "ACTION_CONTINUE",
    "ACTION_PAUSE",
    "ACTION_START",
    "Action",
    "Pose",
    "ProtocolError",
    "RobotState",
    "Topics",
    "decode_actions",
    "decode_robot_state",
    "decode_teleop",
    "encode_teleop",
]

ACTION_START = "mower_logic:idle/start_mowing"
ACTION_PAUSE = "mower_logic:mowing/pause"
ACTION_CONTINUE = "mower_logic:mowing/continue"
ACTION_ABORT_MOWING = "mower_logic:mowing/abort_mowing"
ACTION_ABORT_DOCKING = "mower_logic:docking/abort_docking"


class ProtocolError(ValueError):
    """A message that is not what OpenMower publishes."""


@dataclass(frozen=True, slots=True)
class Topics:
    """The topics of one mower under ``prefix`` (empty, or ending in ``/``)."""

    prefix: str = ""

    @property
    def robot_state(self) -> str:
        return f"{self.prefix}robot_state/json"

    @property
    def actions(self) -> str:
        return f"{self.prefix}actions/json"

    @property
    def map(self) -> str:
        return f"{self.prefix}map/json"

    @property
    def events(self) -> str:
        return f"{self.prefix}events/json"

    @property
    def action(self) -> str:
        return f"{self.prefix}action"

    @property
    def teleop(self) -> str:
        return f"{self.prefix}teleop"


class Pose(msgspec.Struct, frozen=True):
    """``robot_state.pose``: local metres and radians."""

    x: float = 0.0
    y: float = 0.0
    heading: float = 0.0
    pos_accuracy: float = math.inf
    heading_accuracy: float = math.inf
    heading_valid: bool | int = False


class RobotState(msgspec.Struct, frozen=True):
    """One ``robot_state/json`` message (fields the firmware lacks keep their defaults)."""

    battery_percentage: float = 0.0
    gps_percentage: float = 0.0
    current_action_progress: float = 0.0
    current_state: str = "NULL"
    current_sub_state: str = ""
    current_area: int = -1
    current_path: int = -1
    current_path_index: int = -1
    emergency: bool | int = False
    is_charging: bool | int = False
    rain_detected: bool | int = False
    pose: Pose | None = None


class Action(msgspec.Struct, frozen=True):
    """One entry of ``actions/json``."""

    action_id: str
    action_name: str = ""
    enabled: bool | int = False


_STATE = msgspec.json.Decoder(RobotState)
_ACTIONS = msgspec.json.Decoder(list[Action])


def decode_robot_state(payload: bytes) -> RobotState:
    """A ``robot_state/json`` payload; ``ProtocolError`` when it is not one.

    nlohmann::json writes a NaN (an accuracy not known yet) as ``null``: a ``null``
    number is read as NaN rather than losing the whole state.
    """
    try:
        return _STATE.decode(payload)
    except msgspec.ValidationError as first:
        try:
            raw = msgspec.json.decode(payload)
            if isinstance(raw, dict):
                _nulls_as_nan(raw, RobotState)
                if isinstance(raw.get("pose"), dict):
                    _nulls_as_nan(raw["pose"], Pose)
            return msgspec.convert(raw, RobotState)
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise ProtocolError(f"robot_state/json: {first}") from first
    except msgspec.DecodeError as err:
        raise ProtocolError(f"robot_state/json: {err}") from err


def _nulls_as_nan(fields: dict[str, Any], kind: type[msgspec.Struct]) -> None:
    floats = {f.name for f in msgspec.structs.fields(kind) if f.type is float}
    for name in floats & fields.keys():
        if fields[name] is None:
            fields[name] = math.nan


def decode_actions(payload: bytes) -> dict[str, bool]:
    """``actions/json`` as action id -> enabled."""
    try:
        actions = _ACTIONS.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise ProtocolError(f"actions/json: {err}") from err
    return {a.action_id: bool(a.enabled) for a in actions}


# BSON (bsonspec.org): a document is its int32 length, elements, a 0 byte; a double
# element is 0x01, the name as a C string, 8 bytes little-endian. ``teleop`` needs no more.
_DOUBLE = 0x01


def encode_teleop(vx: float, vz: float) -> bytes:
    """The BSON document ``{"vx": vx, "vz": vz}`` xbot_monitoring reads from ``teleop``."""
    body = b"".join(
        bytes([_DOUBLE]) + name + b"\x00" + struct.pack("<d", value)
        for name, value in ((b"vx", vx), (b"vz", vz))
    )
    return struct.pack("<i", len(body) + 5) + body + b"\x00"


def decode_teleop(payload: bytes) -> dict[str, Any]:
    """A ``teleop`` BSON document of doubles as a dict; ``ProtocolError`` otherwise."""
    if len(payload) < 5 or struct.unpack_from("<i", payload)[0] != len(payload):
        raise ProtocolError("teleop: not a BSON document")
    out: dict[str, Any] = {}
    at = 4
    while payload[at] != 0:
        kind = payload[at]
        end = payload.index(b"\x00", at + 1)
        name = payload[at + 1 : end].decode()
        if kind != _DOUBLE:
            raise ProtocolError(f"teleop: field {name!r} is not a double")
        (out[name],) = struct.unpack_from("<d", payload, end + 1)
        at = end + 9
    return out
