"""The geofence rules ``left_area`` and ``theft_suspected``, pure, over a ``MowerWatch``.

=================  ========  ==========================================================
kind               severity  fires when
=================  ========  ==========================================================
left_area          critical  outside every work area of its site, or inside a stay-out
                             zone, for ``geofence`` and farther than ``geofence_m``;
                             once per occurrence, until it is back inside
theft_suspected    critical  while not mowing, carried ``theft_distance_m`` from where it
                             began to move faster than ``theft_speed_mps``; once per
                             occurrence, until it is back at its dock or mowing
=================  ========  ==========================================================

The rules know no geometry. Where a mower stands against its site's areas is a fact the
caller hands them with the state (``Placement``, found by a pure helper over prepared
geometries, ``ingest/fences.py``): how far outside the permitted ground it is, in metres,
and the stay-out zone it is in, if any. ``None`` means no judgement (no position).

A mower at its dock (``docked``, ``charging``) counts as inside: a charging station often
stands just outside the lawn. ``offline`` states are not judged (their position is old).
The speed of ``theft_suspected`` is measured between positions that differ (``Fix``), so
an idle mower's heartbeats change nothing in the watch; it takes two fast moves in a row
and the distance from where they began, so a jump of the position fix is no theft.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

import msgspec

from contracts.v1 import MowerState
from mowdeck.notifications.rules.emitter import Emitter
from mowdeck.notifications.rules.events import Param
from mowdeck.notifications.rules.watch import Escape, Fix, Flight

__all__ = ["INSIDE", "GeofenceThresholds", "Placement", "distance_m", "left_area", "theft"]

_EARTH_M = 6_371_008.8
_HOME = frozenset({"docked", "charging"})
# Fast moves in a row before a theft is suspected: a position fix that jumps (RTK lost,
# then found again) makes one fast move, or two that end where they began.
_STEPS = 2
# A position that moved less than this from the last fix keeps the fix: the centimetres a
# docked mower's position wanders would otherwise change its watch with every heartbeat.
_FIX_STEP_M = 1.0
_replace = msgspec.structs.replace


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a mower stands against its site's areas: ``outside_m`` metres outside the
    permitted ground (0 inside, or a mower without a site or areas), and the stay-out
    zone it is in, if that is why."""

    outside_m: float
    stay_out: str | None = None


INSIDE = Placement(0.0)


@dataclass(frozen=True, slots=True)
class GeofenceThresholds:
    """The parameters of the geofence rules (see ``NotificationsSettings``)."""

    geofence: timedelta = timedelta(seconds=30)
    geofence_m: float = 5.0
    theft_speed_mps: float = 3.0
    theft_distance_m: float = 20.0


def distance_m(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Metres between two nearby WGS84 points (equirectangular: exact enough for gardens)."""
    north = math.radians(lat2 - lat1) * _EARTH_M
    east = math.radians(lon2 - lon1) * _EARTH_M * math.cos(math.radians(lat2))
    return math.hypot(north, east)


def _iso(at: datetime) -> str:
    return at.isoformat()


def left_area(
    e: Emitter,
    escape: Escape | None,
    state: MowerState,
    placement: Placement | None,
    t: GeofenceThresholds,
) -> Escape | None:
    """The escape after ``state``: started outside, told after ``t.geofence``, ended inside."""
    if state.activity in _HOME:
        return None
    if placement is None or state.activity == "offline":
        return escape  # no judgement: the escape waits for a state with a position
    if placement.outside_m <= 0.0:
        return None
    at = state.observed_at
    if escape is None:
        escape = Escape(since=at)
    if escape.settled or at - escape.since < t.geofence or placement.outside_m <= t.geofence_m:
        return escape
    key = f"left_area:{e.watch.mower_id}:{_iso(escape.since)}"
    params: dict[str, Param] = {
        "distance_m": round(placement.outside_m),
        "outside_seconds": max(0, int((at - escape.since).total_seconds())),
    }
    message = "left_area.outside"
    if placement.stay_out is not None:
        message, params["zone"] = "left_area.stay_out", placement.stay_out
    if e.lasting("left_area", key, message, params):
        return _replace(escape, settled=True)
    return escape


def moved(fix: Fix | None, state: MowerState) -> Fix | None:
    """The last distinct position after ``state``: kept while the mower stands still (or
    its position wanders less than ``_FIX_STEP_M``, as a fix at a dock does)."""
    pos = state.position
    if pos is None:
        return fix
    if fix is not None:
        if fix.lat == pos.lat and fix.lon == pos.lon:
            return fix
        if distance_m(fix.lat, fix.lon, pos.lat, pos.lon) < _FIX_STEP_M:
            return fix
    return Fix(lat=pos.lat, lon=pos.lon, at=state.observed_at)


def theft(
    e: Emitter, flight: Flight | None, fix: Fix | None, state: MowerState, t: GeofenceThresholds
) -> Flight | None:
    """The flight after ``state``: fast moves while not mowing, told once far enough."""
    if state.activity in _HOME or state.activity == "mowing":
        return None
    pos, at = state.position, state.observed_at
    if pos is None or fix is None or (fix.lat == pos.lat and fix.lon == pos.lon):
        return flight  # no move to judge
    seconds = (at - fix.at).total_seconds()
    step = distance_m(fix.lat, fix.lon, pos.lat, pos.lon)
    if seconds <= 0.0 or step / seconds <= t.theft_speed_mps:
        return flight if flight is not None and flight.settled else None
    if flight is None:
        flight = Flight(lat=fix.lat, lon=fix.lon, at=fix.at)
    flight = _replace(flight, steps=flight.steps + 1)
    carried = distance_m(flight.lat, flight.lon, pos.lat, pos.lon)
    if flight.settled or flight.steps < _STEPS or carried < t.theft_distance_m:
        return flight
    key = f"theft_suspected:{e.watch.mower_id}:{_iso(flight.at)}"
    params: dict[str, Param] = {
        "distance_m": round(carried),
        "speed_kmh": round(step / seconds * 3.6, 1),
    }
    if e.lasting("theft_suspected", key, "theft_suspected", params):
        return _replace(flight, settled=True)
    return flight
