"""Pure mapping between OpenMower's MQTT messages and Mowdeck's states and commands.

No I/O and no clock: the link (``link.py``) passes ``now`` and what it last received.
The rules, in one place (docs/adapters.md has the table and its sources):

1. ``state(...)``: a ``robot_state/json`` as a ``MowerState``; what has no field of its
   own goes into ``raw`` under ``openmower.*`` keys, nothing dropped.
2. ``plan(...)``: a command as what to publish (an action id on ``action``, or a velocity
   on ``teleop``) and which reported states confirm it; kinds OpenMower cannot do are
   ``rejected``; an action not enabled in ``actions/json`` right now ``failed``.
3. ``judge(...)``: whether a new ``robot_state`` confirms a plan (``executed``), refutes
   it (``failed``: the emergency latched), or says nothing yet.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from contracts.v1 import (
    Command,
    EmergencyStop,
    ManualDrive,
    MowerState,
    PauseMow,
    Position,
    ResumeMow,
    ReturnToDock,
    StartMow,
    command_kind,
)
from contracts.v1.telemetry import Activity, RtkFix
from mowdeck.devices.openmower import Datum
from mowdeck.gateway.connections.port import CommandOutcome
from simulator.openmower.protocol import (
    ACTION_ABORT_DOCKING,
    ACTION_ABORT_MOWING,
    ACTION_CONTINUE,
    ACTION_PAUSE,
    ACTION_START,
    RobotState,
)

__all__ = [
    "PROTOCOL",
    "Plan",
    "judge",
    "plan",
    "state",
    "to_lat_lon",
]

PROTOCOL = "OpenMower's MQTT interface (connection kind openmower)"
EARTH_RADIUS_M = 6_378_137.0  # WGS84 equatorial radius

# ``current_state`` of mower_logic -> activity; the emergency flag and charging overrule.
_ACTIVITIES: dict[str, Activity] = {
    "IDLE": "idle",
    "UNDOCKING": "leaving",
    "MOWING": "mowing",
    "PAUSED": "paused",
    "DOCKING": "returning",
    "AREA_RECORDING": "manual",
}
# Position accuracy (m) at or under which a fix counts as RTK fixed, then float.
FIXED_M = 0.05
FLOAT_M = 0.5
STOPPED = frozenset({"IDLE", "PAUSED"})


def to_lat_lon(datum: Datum, x: float, y: float) -> tuple[float, float]:
    """Local metres east (``x``) and north (``y``) of ``datum`` as latitude, longitude.

    A local tangent plane: within a garden's few hundred metres it is off by millimetres
    from the ellipsoid; OpenMower's own frame (UTM, through robot_localization) differs
    from true north by the grid convergence, up to about 3 degrees at a zone's edge.
    """
    lat = datum.lat + math.degrees(y / EARTH_RADIUS_M)
    lon = datum.lon + math.degrees(x / (EARTH_RADIUS_M * math.cos(math.radians(datum.lat))))
    return max(-90.0, min(90.0, lat)), (lon + 180.0) % 360.0 - 180.0


def _rtk(rs: RobotState) -> RtkFix:
    accuracy = rs.pose.pos_accuracy if rs.pose is not None else math.inf
    if not rs.gps_percentage > 0 or not math.isfinite(accuracy):
        return "none"
    if accuracy <= FIXED_M:
        return "fixed"
    return "float" if accuracy <= FLOAT_M else "single"


def _activity(rs: RobotState) -> Activity:
    if rs.emergency:
        return "stopped"
    if rs.current_state == "IDLE" and rs.is_charging:
        return "charging"
    return _ACTIVITIES.get(rs.current_state, "idle")


def _position(rs: RobotState, datum: Datum | None) -> Position | None:
    pose = rs.pose
    if datum is None or pose is None or not (math.isfinite(pose.x) and math.isfinite(pose.y)):
        return None
    lat, lon = to_lat_lon(datum, pose.x, pose.y)
    heading: float | None = None
    if pose.heading_valid and math.isfinite(pose.heading):
        # OpenMower: radians counter-clockwise from east; Mowdeck: degrees clockwise from
        # north.
        heading = (90.0 - math.degrees(pose.heading)) % 360.0
        heading = 0.0 if heading >= 360.0 else heading
    return Position(lat=lat, lon=lon, heading_deg=heading)


def state(
    rs: RobotState,
    *,
    mower_id: uuid.UUID,
    account_id: uuid.UUID,
    now: datetime,
    datum: Datum | None,
    last_event: object | None = None,
) -> MowerState:
    """``rs`` as a ``MowerState`` observed at ``now`` (robot_state carries no time)."""
    raw: dict[str, object] = {
        "openmower.current_state": rs.current_state,
        "openmower.current_sub_state": rs.current_sub_state,
        "openmower.current_area": rs.current_area,
        "openmower.current_path": rs.current_path,
        "openmower.current_path_index": rs.current_path_index,
        "openmower.action_progress": rs.current_action_progress,
        "openmower.gps_percentage": rs.gps_percentage,
        "openmower.emergency": bool(rs.emergency),
        "openmower.rain_detected": bool(rs.rain_detected),
    }
    if rs.pose is not None:
        p = rs.pose
        raw["openmower.pose"] = {
            "x": p.x,
            "y": p.y,
            "heading": p.heading,
            "pos_accuracy": p.pos_accuracy if math.isfinite(p.pos_accuracy) else None,
            "heading_accuracy": p.heading_accuracy if math.isfinite(p.heading_accuracy) else None,
            "heading_valid": bool(p.heading_valid),
        }
    if last_event is not None:
        raw["openmower.last_event"] = last_event
    battery = rs.battery_percentage if math.isfinite(rs.battery_percentage) else 0.0
    return MowerState(
        mower_id=mower_id,
        account_id=account_id,
        observed_at=now,
        activity=_activity(rs),
        battery=max(0, min(100, round(battery * 100))),
        charging=bool(rs.is_charging),
        rtk_fix=_rtk(rs),
        error_code="emergency" if rs.emergency else None,
        position=_position(rs, datum),
        raw=raw,
    )


@dataclass(frozen=True, slots=True)
class Plan:
    """What to publish for a command and which reported states confirm it."""

    topic: Literal["action", "teleop"]
    action_id: str | None = None  # on ``action``
    velocity: tuple[float, float] | None = None  # (vx, vz) on ``teleop``
    confirms: frozenset[str] = frozenset()  # current_state values that confirm it
    by_emergency: bool = False  # the emergency flag confirms it too (a stop)


def _enabled(
    candidates: tuple[str, ...], actions: dict[str, bool] | None, rs: RobotState
) -> str | CommandOutcome:
    if actions is None:
        return CommandOutcome("failed", "the mower has published no actions/json yet")
    for action in candidates:
        if actions.get(action):
            return action
    offered = ", ".join(sorted(a for a, on in actions.items() if on)) or "none"
    return CommandOutcome(
        "failed",
        f"{' or '.join(candidates)} is not enabled on the mower now "
        f"(state {rs.current_state}; enabled: {offered})",
    )


# Commands that are one action, and the current_state values that confirm each.
_ACTIONS: dict[type[Command], tuple[str, frozenset[str]]] = {
    StartMow: (ACTION_START, frozenset({"UNDOCKING", "MOWING"})),
    PauseMow: (ACTION_PAUSE, frozenset({"PAUSED"})),
    ResumeMow: (ACTION_CONTINUE, frozenset({"MOWING"})),
    ReturnToDock: (ACTION_ABORT_MOWING, frozenset({"DOCKING", "IDLE"})),
}


def plan(
    command: Command, rs: RobotState, actions: dict[str, bool] | None
) -> Plan | CommandOutcome:
    """How to carry out ``command`` given the last state and actions, or its outcome now."""
    if isinstance(command, ManualDrive):
        if rs.emergency and (command.linear_mps or command.angular_rps):
            return CommandOutcome("failed", "the mower's emergency is latched")
        return Plan("teleop", velocity=(command.linear_mps, command.angular_rps))
    if isinstance(command, EmergencyStop):
        return _stop(rs, actions)
    if isinstance(command, StartMow) and (refused := _start_refusal(command)) is not None:
        return refused
    known = _ACTIONS.get(type(command))
    if known is None:
        return CommandOutcome("rejected", f"{command_kind(command)} is not offered by {PROTOCOL}")
    action, confirms = known
    found = _enabled((action,), actions, rs)
    return found if isinstance(found, CommandOutcome) else Plan("action", found, confirms=confirms)


def _start_refusal(command: StartMow) -> CommandOutcome | None:
    """What of a start OpenMower cannot do: a timed start, a start in one area."""
    if command.duration_min is not None:
        return CommandOutcome(
            "rejected", f"start_mow with duration_min is not offered by {PROTOCOL}"
        )
    if command.work_area is not None:
        # mower_logic's start mows every area of its map in turn; no action names one.
        return CommandOutcome(
            "rejected",
            f"start_mow in work area {command.work_area!r} is not offered by {PROTOCOL}: "
            "it mows every area of its map in turn",
        )
    return None


def _stop(rs: RobotState, actions: dict[str, bool] | None) -> Plan | CommandOutcome:
    """An emergency stop as OpenMower can do it: a pause (or ending a docking)."""
    if rs.emergency or rs.current_state in STOPPED:
        return CommandOutcome("executed", f"already stopped ({rs.current_state})")
    found = _enabled((ACTION_PAUSE, ACTION_ABORT_DOCKING), actions, rs)
    if isinstance(found, CommandOutcome):
        return found
    return Plan("action", action_id=found, confirms=STOPPED, by_emergency=True)


def judge(p: Plan, rs: RobotState) -> CommandOutcome | None:
    """What a ``robot_state`` received after publishing ``p`` says of it (None: nothing yet)."""
    if p.by_emergency and rs.emergency:
        return CommandOutcome("executed", "the mower reports its emergency latched")
    if rs.current_state in p.confirms:
        return CommandOutcome("executed", None)
    if rs.emergency:
        return CommandOutcome("failed", f"the mower's emergency latched ({rs.current_state})")
    return None
