"""Pure rules between the Automower Connect API's mower attributes and Mowdeck's states
and commands (docs/adapters.md has the table).

No I/O and no clock: the link passes ``now`` and the attributes it merged from the REST
snapshot and the events since.

1. ``state(...)``: attributes as a ``MowerState``; what has no field goes into ``raw``
   under ``automower.*`` keys.
2. ``plan(...)``: a command as the API request to make and the attributes that confirm
   it; kinds the API cannot do are ``rejected``.
3. ``judge(...)``: whether new attributes confirm a plan, refute it, or say nothing yet.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal
from zoneinfo import ZoneInfo

from contracts.v1 import (
    Command,
    EmergencyStop,
    MowerState,
    PauseMow,
    Position,
    ResumeMow,
    ReturnToDock,
    SetBladeHeight,
    StartMow,
    command_kind,
)
from contracts.v1.telemetry import Activity
from mowdeck.gateway.connections.automower.local_time import local_instant, local_wall_time
from mowdeck.gateway.connections.port import CommandOutcome
from simulator.automower.protocol import (
    ACTION_PARK_UNTIL_FURTHER_NOTICE,
    ACTION_PARK_UNTIL_NEXT_SCHEDULE,
    ACTION_PAUSE,
    ACTION_RESUME_SCHEDULE,
    ACTION_START,
    ACTION_START_IN_WORK_AREA,
    ERROR_STATES,
    MowerAttributes,
)

__all__ = [
    "PROTOCOL",
    "Plan",
    "height_level",
    "judge",
    "level_height_mm",
    "plan",
    "state",
]

PROTOCOL = "Husqvarna's Automower Connect API (connection kind automower)"
# Start needs a duration; start_mow without one mows this long (the API's longest).
START_DEFAULT_MIN = 1440
# The API's cutting height is a level 1..9; most models span 20-60 mm in 5 mm steps.
LEVEL_MIN, LEVEL_MAX, LEVEL_BASE_MM, LEVEL_STEP_MM = 1, 9, 20, 5

_ACTIVITIES: dict[str, Activity] = {
    "MOWING": "mowing",
    "GOING_HOME": "returning",
    "CHARGING": "charging",
    "LEAVING": "leaving",
    "PARKED_IN_CS": "docked",
    "STOPPED_IN_GARDEN": "stopped",
}
# Not moving, whatever else: an emergency stop has nothing left to do.
STOPPED_STATES = frozenset({"PAUSED", "STOPPED", "OFF"}) | ERROR_STATES
STILL_ACTIVITIES = frozenset({"PARKED_IN_CS", "CHARGING", "STOPPED_IN_GARDEN"})


def level_height_mm(level: int) -> int:
    """A cutting-height level as millimetres (20-60 mm models)."""
    return LEVEL_BASE_MM + LEVEL_STEP_MM * (level - LEVEL_MIN)


def height_level(height_mm: int) -> int | None:
    """The level nearest ``height_mm``; None when it is outside the levels' span."""
    level = round((height_mm - LEVEL_BASE_MM) / LEVEL_STEP_MM) + LEVEL_MIN
    return level if LEVEL_MIN <= level <= LEVEL_MAX else None


def _activity(a: MowerAttributes) -> Activity:
    m = a.mower
    if not a.metadata.connected or m.state == "OFF":
        return "offline"
    if m.state in ERROR_STATES:
        return "error"
    if m.state == "PAUSED":
        return "paused"
    if m.state == "STOPPED":
        return "stopped"  # needs someone at the mower (its stop button, a PIN)
    return _ACTIVITIES.get(m.activity, "idle")


def _local(ms: int, zone: ZoneInfo | None) -> str | None:
    """A mower-local time as ISO 8601: a UTC instant with the zone, else the wall time."""
    at = local_instant(ms, zone) if zone is not None else local_wall_time(ms)
    return at.isoformat() if at is not None else None


def _work_area_name(a: MowerAttributes) -> str | None:
    wanted = a.mower.work_area_id
    for area in a.work_areas:
        if wanted is not None and str(area.work_area_id) == str(wanted):
            return area.name
    return None


def state(
    a: MowerAttributes,
    *,
    mower_id: uuid.UUID,
    account_id: uuid.UUID,
    now: datetime,
    zone: ZoneInfo | None = None,
) -> MowerState:
    """``a`` as a ``MowerState`` observed at ``now``; ``zone`` is the mower's clock's."""
    m, p = a.mower, a.planner
    # Mower-local times: "..._at" a UTC instant when the zone is known, else "..._local",
    # the mower's wall time without an offset.
    when = "_at" if zone is not None else "_local"
    raw: dict[str, object] = {
        "automower.model": a.system.model or None,
        f"automower.error_code{when}": _local(m.error_code_timestamp, zone),
        "automower.work_area_name": _work_area_name(a),
        "automower.mode": m.mode,
        "automower.activity": m.activity,
        "automower.state": m.state,
        "automower.inactive_reason": m.inactive_reason,
        "automower.error_code": m.error_code,
        "automower.error_code_timestamp": m.error_code_timestamp,
        "automower.work_area_id": m.work_area_id,
        "automower.planner": {
            "next_start_timestamp": p.next_start_timestamp,
            f"next_start{when}": _local(p.next_start_timestamp, zone),
            "override_action": p.override.action,
            "restricted_reason": p.restricted_reason,
            "external_reason": p.external_reason,
        },
        "automower.connected": a.metadata.connected,
        "automower.status_timestamp": a.metadata.status_timestamp,
        "automower.cutting_height_level": a.settings.cutting_height,
        "automower.remaining_charging_time": a.battery.remaining_charging_time,
    }
    position = None
    if a.positions:
        newest = a.positions[0]
        if -90 <= newest.latitude <= 90 and -180 <= newest.longitude <= 180:
            position = Position(lat=newest.latitude, lon=newest.longitude)
    level = a.settings.cutting_height
    return MowerState(
        mower_id=mower_id,
        account_id=account_id,
        observed_at=now,
        activity=_activity(a),
        battery=max(0, min(100, a.battery.battery_percent)),
        charging=m.activity == "CHARGING",
        connection="automower-cloud" if a.metadata.connected else None,
        blade_height_mm=level_height_mm(level) if level and level >= LEVEL_MIN else None,
        error_code=f"automower.{m.error_code}" if m.error_code else None,
        position=position,
        raw=raw,
    )


@dataclass(frozen=True, slots=True)
class Plan:
    """The API request for a command, and what confirms it."""

    path: Literal["actions", "settings"]
    body: Mapping[str, object]
    what: str  # the action type or setting, for reasons
    activities: frozenset[str] = frozenset()  # mower.activity values that confirm it
    states: frozenset[str] = frozenset()  # mower.state values that confirm it
    level: int | None = None  # a cutting height level that confirms it


def _action(
    kind: str, activities: frozenset[str] = frozenset(), states: frozenset[str] = frozenset()
) -> Plan:
    return Plan("actions", {"data": {"type": kind}}, kind, activities, states)


# Commands that are one action, and the activities and states that confirm each.
_ACTIONS: dict[type[Command], Plan] = {
    PauseMow: _action(ACTION_PAUSE, states=frozenset({"PAUSED"})),
    # Resumed to its schedule: mowing if the schedule says so, else parked, not paused.
    ResumeMow: _action(ACTION_RESUME_SCHEDULE, states=frozenset({"IN_OPERATION", "RESTRICTED"})),
    ReturnToDock: _action(
        ACTION_PARK_UNTIL_NEXT_SCHEDULE, frozenset({"GOING_HOME", "PARKED_IN_CS", "CHARGING"})
    ),
}
# With Mowdeck's calendar ruling the mower (``AutomowerOptions.calendar``), a park lasts
# until Mowdeck starts it again: the mower's own calendar never starts it.
_PARK_FOR_GOOD = _action(
    ACTION_PARK_UNTIL_FURTHER_NOTICE, frozenset({"GOING_HOME", "PARKED_IN_CS", "CHARGING"})
)


def plan(command: Command, a: MowerAttributes, calendar: str = "mowdeck") -> Plan | CommandOutcome:
    """How to carry out ``command`` given the last attributes, or its outcome now;
    ``calendar`` is whose calendar rules the mower (``mowdeck`` or ``mower``)."""
    if isinstance(command, EmergencyStop):
        if a.mower.state in STOPPED_STATES or a.mower.activity in STILL_ACTIVITIES:
            return CommandOutcome(
                "executed", f"already stopped ({a.mower.state}, {a.mower.activity})"
            )
        return _action(ACTION_PAUSE, states=STOPPED_STATES)
    if isinstance(command, StartMow):
        return _start(command, a)
    if isinstance(command, SetBladeHeight):
        return _blade_height(command.height_mm)
    known = _ACTIONS.get(type(command))
    if isinstance(command, ReturnToDock) and calendar == "mowdeck":
        known = _PARK_FOR_GOOD
    if known is None:
        return CommandOutcome("rejected", f"{command_kind(command)} is not offered by {PROTOCOL}")
    return known


def _start(command: StartMow, a: MowerAttributes) -> Plan | CommandOutcome:
    if command.work_area is not None:
        return _start_in_work_area(command, a)
    minutes = command.duration_min or START_DEFAULT_MIN
    body = {"data": {"type": ACTION_START, "attributes": {"duration": minutes}}}
    return Plan("actions", body, ACTION_START, frozenset({"LEAVING", "MOWING"}))


def _start_in_work_area(command: StartMow, a: MowerAttributes) -> Plan | CommandOutcome:
    """``StartInWorkArea`` with the id of the work area the mower names ``work_area``."""
    wanted = command.work_area or ""
    if not a.capabilities.work_areas or not a.work_areas:
        return CommandOutcome(
            "rejected",
            f"start_mow in work area {wanted!r}: this mower has no work areas "
            f"({a.system.model or 'its model'} through {PROTOCOL})",
        )
    key = wanted.strip().casefold()
    found = [w for w in a.work_areas if w.name.strip().casefold() == key and w.name.strip()]
    if not found:
        names = ", ".join(repr(w.name) for w in a.work_areas if w.name.strip())
        return CommandOutcome(
            "rejected", f"the mower has no work area named {wanted!r} (it has {names})"
        )
    area = found[0]
    if not area.enabled:
        return CommandOutcome("rejected", f"work area {area.name!r} is disabled on the mower")
    attributes: dict[str, object] = {"workAreaId": area.work_area_id}
    if command.duration_min is not None:
        attributes["duration"] = command.duration_min
    body = {"data": {"type": ACTION_START_IN_WORK_AREA, "attributes": attributes}}
    what = f"{ACTION_START_IN_WORK_AREA} {area.name!r} ({area.work_area_id})"
    return Plan("actions", body, what, frozenset({"LEAVING", "MOWING"}))


def _blade_height(height_mm: int) -> Plan | CommandOutcome:
    level = height_level(height_mm)
    if level is None:
        return CommandOutcome(
            "failed",
            f"{height_mm} mm is outside the cutting heights the API sets "
            f"({level_height_mm(LEVEL_MIN)}-{level_height_mm(LEVEL_MAX)} mm, levels "
            f"{LEVEL_MIN}-{LEVEL_MAX})",
        )
    body = {"data": {"type": "settings", "attributes": {"cuttingHeight": level}}}
    return Plan("settings", body, f"cuttingHeight {level}", level=level)


def judge(p: Plan, a: MowerAttributes) -> CommandOutcome | None:
    """What attributes heard after requesting ``p`` say of it (None: nothing yet)."""
    m = a.mower
    if p.level is not None:
        if a.settings.cutting_height == p.level:
            return CommandOutcome("executed", None)
    elif m.activity in p.activities or m.state in p.states:
        return CommandOutcome("executed", None)
    if m.state in ERROR_STATES:
        return CommandOutcome("failed", f"the mower reports {m.state} (error {m.error_code})")
    return None
