"""Mower physics as pure functions: motion, stripes, battery, dead-man and e-stop latching.

Time is simulated seconds as a float; nothing here reads a clock or does I/O, so every
rule is tested with fixed times.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import msgspec

from contracts.v1 import (
    Activity,
    Command,
    EmergencyStop,
    ManualDrive,
    PauseMow,
    ResumeMow,
    ReturnToDock,
    SetBladeHeight,
    SetSpeed,
    StartMow,
)
from simulator.garden import Garden, heading_to

__all__ = ["AT_DOCK", "MOVING", "Body", "Job", "Params", "apply_command", "step"]

Job = Literal["none", "active", "held"]
"""``active`` continues by itself (after charging); ``held`` waits for ``resume_mow``."""

AT_DOCK: frozenset[str] = frozenset({"docked", "charging"})
MOVING: frozenset[str] = frozenset({"leaving", "mowing", "returning", "manual"})


class Params(msgspec.Struct, frozen=True, kw_only=True):
    """Physical constants of a mower model; rates are per simulated second."""

    drain_mow: float = 100.0 / 3600.0  # one hour of mowing on a full battery
    drain_drive: float = 100.0 / 5400.0
    charge_rate: float = 100.0 / 2700.0  # 45 minutes from empty to full
    return_level: float = 15.0
    resume_level: float = 95.0
    stuck_error_after: float = 20.0
    max_step: float = 1.0
    arrive_within: float = 0.3
    # Wall seconds to simulated seconds: the manual dead-man timeout is the operator's
    # real time, so at 100x a ttl of 1 s lasts 100 simulated seconds.
    speedup: float = 1.0


class Body(msgspec.Struct, frozen=True, kw_only=True):
    """Everything physical about one mower at one instant."""

    activity: Activity = "docked"
    battery: float = 100.0
    charging: bool = False
    x: float = 0.0
    y: float = -1.0
    heading: float = 0.0
    speed_mps: float = 0.4
    blade_height_mm: int = 40
    job: Job = "none"
    progress: float = 0.0
    job_ends_at: float | None = None
    paused_from: Activity | None = None
    manual_linear: float = 0.0
    manual_angular: float = 0.0
    manual_until: float = 0.0
    error_code: str | None = None
    stuck: bool = False
    stuck_since: float | None = None
    # Faults that move the mower by themselves (``escape``, ``theft``): straight along
    # ``heading`` at this speed (m/s); 0 for none.
    escape_mps: float = 0.0
    carried_mps: float = 0.0


_replace = msgspec.structs.replace


def step(body: Body, dt: float, now: float, params: Params, garden: Garden) -> Body:
    """The body ``dt`` simulated seconds later, at ``now``, in slices of ``max_step``."""
    if dt <= 0.0:
        return body
    slices = math.ceil(dt / params.max_step)
    h = dt / slices
    for i in range(slices - 1, -1, -1):
        body = _advance(body, h, now - i * h, params, garden)
    return body


def _advance(b: Body, h: float, now: float, p: Params, g: Garden) -> Body:
    if b.carried_mps > 0.0 or b.escape_mps > 0.0:
        return _away(b, h, p)
    if b.job != "none" and b.job_ends_at is not None and now >= b.job_ends_at:
        # The job's duration is over: it ends wherever the mower is.
        nxt = "returning" if b.activity in ("leaving", "mowing") else b.activity
        b = _replace(b, job="none", job_ends_at=None, activity=nxt)
    if b.activity in MOVING and b.stuck:
        if b.activity == "manual" and now >= b.manual_until:
            # The dead-man stops the wheels whether or not they grip: idle, not stuck.
            return _replace(
                b, activity="idle", manual_linear=0.0, manual_angular=0.0, stuck_since=None
            )
        return _stuck(b, h, now, p)
    motion = _MOTION.get(b.activity)
    # idle, paused, stopped, error, offline: nothing moves
    return b if motion is None else motion(b, h, now, p, g)


def _away(b: Body, h: float, p: Params) -> Body:
    # Carried (blades stopped, no drain) or escaping (mowing on, its own speed).
    speed = b.carried_mps or b.escape_mps
    rad = math.radians(b.heading)
    x, y = b.x + speed * h * math.sin(rad), b.y + speed * h * math.cos(rad)
    battery = b.battery if b.carried_mps else max(0.0, b.battery - p.drain_mow * h)
    return _replace(b, x=x, y=y, battery=battery)


def _stuck(b: Body, h: float, now: float, p: Params) -> Body:
    # Wheels turn, position stays; after a while the mower gives up with an error.
    battery = max(0.0, b.battery - p.drain_drive * h)
    since = b.stuck_since if b.stuck_since is not None else now - h
    if now - since >= p.stuck_error_after:
        return _replace(b, battery=battery, activity="error", error_code="stuck", stuck_since=since)
    return _replace(b, battery=battery, stuck_since=since)


def _low(b: Body, battery: float, p: Params) -> Body | None:
    if battery <= 0.0:
        return _replace(b, battery=0.0, activity="error", error_code="battery_empty")
    if battery <= p.return_level and b.activity != "returning":
        # Head home but keep the job so it continues after charging.
        return _replace(b, battery=battery, activity="returning")
    return None


def _mow(b: Body, h: float, _now: float, p: Params, g: Garden) -> Body:
    battery = b.battery - p.drain_mow * h
    progress = b.progress + b.speed_mps * h
    done = progress >= g.path_length
    wp = g.stripe_point(progress)
    b = _replace(b, x=wp.x, y=wp.y, heading=wp.heading, progress=min(progress, g.path_length))
    if done:
        return _replace(
            b, battery=max(battery, 0.0), activity="returning", job="none", job_ends_at=None
        )
    return _low(b, battery, p) or _replace(b, battery=battery)


def _drive(b: Body, tx: float, ty: float, h: float) -> tuple[Body, bool]:
    dx, dy = tx - b.x, ty - b.y
    dist = math.hypot(dx, dy)
    reach = b.speed_mps * h
    if dist <= reach:
        return _replace(b, x=tx, y=ty), True
    f = reach / dist
    return _replace(b, x=b.x + dx * f, y=b.y + dy * f, heading=heading_to(dx, dy)), False


def _leave(b: Body, h: float, _now: float, p: Params, g: Garden) -> Body:
    wp = g.stripe_point(b.progress)
    battery = b.battery - p.drain_drive * h
    b, arrived = _drive(_replace(b, charging=False), wp.x, wp.y, h)
    low = _low(b, battery, p)
    if low is not None:
        return low
    if arrived:
        return _replace(b, battery=battery, activity="mowing", heading=wp.heading)
    return _replace(b, battery=battery)


def _return(b: Body, h: float, _now: float, p: Params, g: Garden) -> Body:
    battery = b.battery - p.drain_drive * h
    b, arrived = _drive(b, g.dock_x, g.dock_y, h)
    if battery <= 0.0:
        return _replace(b, battery=0.0, activity="error", error_code="battery_empty")
    if arrived:
        full = battery >= 100.0
        return _replace(
            b, battery=battery, activity="docked" if full else "charging", charging=not full
        )
    return _replace(b, battery=battery)


def _dock(b: Body, h: float, _now: float, p: Params, _g: Garden) -> Body:
    battery = min(100.0, b.battery + p.charge_rate * h) if b.battery < 100.0 else b.battery
    if b.job == "active" and battery >= p.resume_level:
        return _replace(b, battery=battery, activity="leaving", charging=False)
    if battery >= 100.0:
        return _replace(b, battery=100.0, activity="docked", charging=False)
    return _replace(b, battery=battery, activity="charging", charging=True)


def _manual(b: Body, h: float, now: float, p: Params, g: Garden) -> Body:
    # Move only for the part of the slice before the dead-man deadline.
    moving = min(h, b.manual_until - (now - h))
    if moving > 0:
        # Positive angular speed turns counter-clockwise (ROS convention); compass is clockwise.
        heading = (b.heading - math.degrees(b.manual_angular * moving)) % 360.0
        dist = b.manual_linear * moving
        rad = math.radians(heading)
        x, y = b.x + dist * math.sin(rad), b.y + dist * math.cos(rad)
        b = _replace(
            b, x=x, y=y, heading=heading, battery=max(0.0, b.battery - p.drain_drive * moving)
        )
        if not g.contains(x, y):
            return _replace(
                b,
                activity="error",
                error_code="outside_area",
                manual_linear=0.0,
                manual_angular=0.0,
            )
    if now >= b.manual_until:
        return _replace(b, activity="idle", manual_linear=0.0, manual_angular=0.0)
    return b


def apply_command(b: Body, command: Command, now: float, p: Params) -> tuple[Body, str | None]:
    """The body after ``command`` at ``now`` and ``None``, or the unchanged body and why not."""
    if b.activity == "error" and not isinstance(command, _ANY_STATE):
        return b, f"mower is in error {b.error_code!r}; clear the fault first"
    handler = _COMMANDS[type(command)]
    return handler(b, command, now, p)


def _start(b: Body, c: Command, now: float, p: Params) -> tuple[Body, str | None]:
    assert isinstance(c, StartMow)
    ends = now + c.duration_min * 60.0 if c.duration_min is not None else None
    b = _replace(b, job="active", progress=0.0, job_ends_at=ends, paused_from=None)
    return _depart(b, p), None


def _return_to_dock(b: Body, _c: Command, _now: float, _p: Params) -> tuple[Body, str | None]:
    if b.activity in AT_DOCK:
        return b, None
    # A job interrupted by the user waits for resume_mow instead of continuing by itself.
    job: Job = "none" if b.job == "none" else "held"
    return _replace(
        b, activity="returning", job=job, paused_from=None, manual_linear=0.0, manual_angular=0.0
    ), None


def _blade(b: Body, c: Command, _now: float, _p: Params) -> tuple[Body, str | None]:
    assert isinstance(c, SetBladeHeight)
    return _replace(b, blade_height_mm=c.height_mm), None


def _speed(b: Body, c: Command, _now: float, _p: Params) -> tuple[Body, str | None]:
    assert isinstance(c, SetSpeed)
    return _replace(b, speed_mps=c.speed_mps), None


def _estop(b: Body, _c: Command, _now: float, _p: Params) -> tuple[Body, str | None]:
    # Latches: only start, resume or return release it. An error stays the error.
    job: Job = "held" if b.job == "active" else b.job
    activity: Activity = "error" if b.activity == "error" else "stopped"
    return _replace(
        b,
        activity=activity,
        job=job,
        charging=False,
        paused_from=None,
        manual_linear=0.0,
        manual_angular=0.0,
        manual_until=0.0,
    ), None


def _depart(b: Body, p: Params) -> Body:
    if b.activity in AT_DOCK and b.battery < p.resume_level:
        return _replace(b, activity="charging", charging=True)  # leaves once charged
    return _replace(b, activity="leaving", charging=False, manual_linear=0.0, manual_angular=0.0)


def _pause(b: Body, _c: Command, _now: float, _p: Params) -> tuple[Body, str | None]:
    if b.activity == "paused":
        return b, None
    if b.activity in AT_DOCK and b.job == "active":
        return _replace(b, job="held"), None  # stays on the dock instead of leaving
    if b.activity not in ("mowing", "leaving", "returning"):
        return b, f"nothing to pause while {b.activity}"
    job: Job = "held" if b.job == "active" else b.job
    return _replace(b, activity="paused", paused_from=b.activity, job=job), None


def _resume(b: Body, _c: Command, _now: float, p: Params) -> tuple[Body, str | None]:
    if b.activity == "paused" and (b.paused_from == "returning" or b.job == "none"):
        return _replace(b, activity="returning", paused_from=None), None
    if b.job != "none":
        return _depart(_replace(b, job="active", paused_from=None), p), None
    if b.activity == "stopped":
        return _replace(b, activity="idle"), None  # releases the latch; nothing to continue
    return b, f"no job to resume while {b.activity}"


def _manual_drive(b: Body, c: Command, now: float, p: Params) -> tuple[Body, str | None]:
    assert isinstance(c, ManualDrive)
    if b.activity == "stopped":
        return b, "emergency stop is latched; send start_mow, resume_mow or return_to_dock"
    job: Job = "held" if b.job == "active" else b.job
    until = now + c.ttl_ms / 1000.0 * p.speedup
    return _replace(
        b,
        activity="manual",
        job=job,
        charging=False,
        paused_from=None,
        manual_linear=c.linear_mps,
        manual_angular=c.angular_rps,
        manual_until=until,
    ), None


_Motion = Callable[[Body, float, float, Params, Garden], Body]
_MOTION: dict[str, _Motion] = {
    "mowing": _mow,
    "leaving": _leave,
    "returning": _return,
    "docked": _dock,
    "charging": _dock,
    "manual": _manual,
}
_Handler = Callable[[Body, Command, float, Params], tuple[Body, "str | None"]]
_COMMANDS: dict[type, _Handler] = {
    StartMow: _start,
    PauseMow: _pause,
    ResumeMow: _resume,
    ReturnToDock: _return_to_dock,
    EmergencyStop: _estop,
    SetBladeHeight: _blade,
    SetSpeed: _speed,
    ManualDrive: _manual_drive,
}
# Commands a mower in error still takes: they stop it or change settings, never move it.
_ANY_STATE = (EmergencyStop, SetBladeHeight, SetSpeed)
