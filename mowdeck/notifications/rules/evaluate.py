"""The notification rules of ADR 0022 as pure functions over a ``MowerWatch``.

=================  ========  ==========================================================
kind               severity  fires when
=================  ========  ==========================================================
job_started        info      the activity becomes ``mowing`` while no job runs
mowing_finished    info      a job of at least ``job_min`` is back at the dock, not to
                             recharge (see "Mid-job recharge" below)
mower_stuck        critical  activity ``error``, once per error code until it clears;
                             or no move of ``stuck_distance_m`` while mowing for
                             ``stuck``
battery_low        warning   below ``battery_low_percent`` while not charging; again
                             only after it was back at ``battery_rearm_percent``
mower_offline      warning   no newer state for ``offline_after``; a state with activity
                             ``offline``; or ``mower.disconnected`` and no newer state
                             within ``offline_grace``
mower_online       info      the first newer state after a told ``mower_offline``
left_area          critical  ``rules/geofence.py``: outside the site's areas
theft_suspected    critical  ``rules/geofence.py``: carried away fast while not mowing
=================  ========  ==========================================================

Time comes from the states. A rule's clock is the state's ``observed_at``: a state not
newer than the watch's advances nothing (the gateway republishes the last state of a
mower whose link is down, old ``observed_at`` and all, and that is no contact). A link
event applies only when newer than everything the watch knows. The one clock of the
service itself is the silence timer's (``evaluate_silence``'s ``now``), and it counts
from ``contact_at``, the service's time when the newest state was applied.

A state observed more than ``max_clock_skew`` ahead of the service's clock is ignored.
The first state of a mower (or the first after it moved to another account) only
initialises the watch: what it shows (a job, an error, a low battery, offline) is old
news, reported suppressed with reason ``first_state``.

One notification per kind and mower per ``cooldown``. An occurrence that only happens
once (a job starts, a job finishes) is dropped when the cooldown holds it. A condition
that lasts (stuck, battery low, offline, and the online owed after a told offline) is
held and sent when the cooldown is over, if it still holds then: so the user's last word
about a flapping mower is never the wrong one. Either way it is reported suppressed once.

Mid-job recharge. A mower whose battery runs low during a job heads home, charges and
goes back out to finish (the simulator returns at 15 %, leaves again at 95 %). The rules
take a job that reaches the dock *charging* at or below ``recharge_percent`` to be
recharging, not finished: nothing is sent; ``leaving`` or ``mowing`` continues the job.
A recharging job whose mower has not gone out again (``leaving`` or ``mowing``) within
``recharge_max`` of docking has finished after all (it ended with a low battery, or the
mower will not go out by itself), and its duration runs to the moment it docked. A job
that reaches the dock above that level, or docked without charging, has finished.
``raw`` fields are not used: they differ per device adapter.

The silence timer. ``evaluate_silence(watch, now, consuming_since)`` counts a mower's
silence from ``max(contact_at, consuming_since)``, and a disconnect's grace from
``max(disconnected_at, consuming_since)``: time during which the service was not
consuming (a restart, an outage of every replica) is not the mower's silence, so a
restart never sends a storm of ``mower_offline``. ``silence_due`` says when the scan
should look at a watch next.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

import msgspec

from contracts.v1 import MowerState
from mowdeck.notifications.rules.alarms import first_sight
from mowdeck.notifications.rules.emitter import Emitter
from mowdeck.notifications.rules.events import Outcome, Param, Suppressed
from mowdeck.notifications.rules.geofence import (
    GeofenceThresholds,
    Placement,
    left_area,
    moved,
    theft,
)
from mowdeck.notifications.rules.kinds import Kind
from mowdeck.notifications.rules.watch import (
    Anchor,
    Escape,
    Fault,
    Job,
    MowerWatch,
    Offline,
)

__all__ = [
    "MESSAGE_KEYS",
    "Link",
    "Thresholds",
    "evaluate_link",
    "evaluate_silence",
    "evaluate_state",
    "silence_due",
]

Link = Literal["connected", "disconnected"]

MESSAGE_KEYS = frozenset(
    {
        "job_started",
        "mowing_finished",
        "mower_stuck.error",
        "mower_stuck.standstill",
        "battery_low",
        "mower_offline.silence",
        "mower_offline.link",
        "mower_offline.state",
        "mower_online",
        "left_area.outside",
        "left_area.stay_out",
        "theft_suspected",
    }
)
"""Every message key an event of the rules carries (``messages/*.json`` has each)."""

_EARTH_M = 6_371_008.8
_AT_DOCK = frozenset({"docked", "charging"})
_OUT = frozenset({"leaving", "mowing"})
_replace = msgspec.structs.replace


@dataclass(frozen=True, slots=True)
class Thresholds:
    """The parameters of the rules (ADR 0022's defaults; see ``NotificationsSettings``)."""

    job_min: timedelta = timedelta(seconds=120)
    stuck: timedelta = timedelta(seconds=300)
    stuck_distance_m: float = 0.5
    battery_low_percent: int = 20
    battery_rearm_percent: int = 30
    offline_after: timedelta = timedelta(seconds=120)
    offline_grace: timedelta = timedelta(seconds=30)
    cooldown: timedelta = timedelta(seconds=300)
    recharge_percent: int = 25
    recharge_max: timedelta = timedelta(seconds=7200)
    # A state observed further ahead of the service's clock is ignored: one from a clock
    # years ahead would leave every later state "not newer" and the mower silent for good.
    max_clock_skew: timedelta = timedelta(seconds=300)
    geofence: GeofenceThresholds = field(default_factory=GeofenceThresholds)


def _iso(at: datetime) -> str:
    return at.isoformat()


def _seconds(span: timedelta) -> int:
    return max(0, int(span.total_seconds()))


# -- states ------------------------------------------------------------------------


def _charging(state: MowerState) -> bool:
    return state.charging or state.activity == "charging"


def _first(
    state: MowerState,
    now: datetime,
    t: Thresholds,
    placement: Placement | None,
    previous: MowerWatch | None,
) -> Outcome[MowerWatch]:
    """The watch a mower's first state starts; what it shows is old news, told to nobody,
    though the conditions it shows open their alarms (``alarms.first_sight``).
    ``previous`` is the watch of the mower's former account, if it moved."""
    at, m = state.observed_at, state.mower_id
    escape: Escape | None = None
    quiet: list[tuple[Kind, str]] = []
    job: Job | None = None
    fault: Fault | None = None
    anchor: Anchor | None = None
    offline: Offline | None = None
    if state.activity == "mowing":
        job = Job(started_at=at)
        quiet.append(("job_started", f"job_started:{m}:{_iso(at)}"))
        if state.position is not None:
            anchor = Anchor(lat=state.position.lat, lon=state.position.lon, at=at)
    if state.activity == "error":
        fault = Fault(code=state.error_code or "unknown", since=at, settled=True)
        quiet.append(("mower_stuck", f"mower_stuck:{m}:error:{fault.code}:{_iso(at)}"))
    low = state.battery < t.battery_low_percent
    told_low = low and not _charging(state)
    if told_low:
        quiet.append(("battery_low", f"battery_low:{m}:{_iso(at)}"))
    if state.activity == "offline":
        offline = Offline(since=at, cause="state", quiet=True)
        quiet.append(("mower_offline", f"mower_offline:{m}:{_iso(at)}"))
    home = state.activity in _AT_DOCK or state.activity == "offline"
    if placement is not None and placement.outside_m > 0.0 and not home:
        escape = Escape(since=at, settled=True)
        quiet.append(("left_area", f"left_area:{m}:{_iso(at)}"))
    watch = MowerWatch(
        mower_id=m,
        account_id=state.account_id,
        observed_at=at,
        contact_at=now,
        activity=state.activity,
        battery=state.battery,
        job=job,
        battery_armed_at=None if low else at,
        fault=fault,
        anchor=anchor,
        offline=offline,
        escape=escape,
        fix=moved(None, state),
    )
    suppressed = [
        Suppressed(kind=kind, mower_id=m, reason="first_state", dedupe_key=key, at=at)
        for kind, key in quiet
    ]
    raised, alarms = first_sight(watch, at, battery_low=told_low, previous=previous)
    if raised:
        watch = _replace(watch, alarms=raised)
    return Outcome(watch, [], suppressed, alarms=tuple(alarms))


def _finish(e: Emitter, job: Job, ended_at: datetime, t: Thresholds) -> None:
    duration = ended_at - job.started_at
    if duration >= t.job_min:
        key = f"mowing_finished:{e.watch.mower_id}:{_iso(job.started_at)}"
        params: dict[str, Param] = {
            "duration_seconds": _seconds(duration),
            "started_at": _iso(job.started_at),
        }
        e.once("mowing_finished", key, "mowing_finished", params)


def _job(e: Emitter, job: Job | None, state: MowerState, t: Thresholds) -> Job | None:
    if job is None:
        if state.activity != "mowing":
            return None
        at = state.observed_at
        e.once(
            "job_started",
            f"job_started:{e.watch.mower_id}:{_iso(at)}",
            "job_started",
            {"started_at": _iso(at)},
        )
        return Job(started_at=at)
    if job.recharging_since is None:
        return _running(e, job, state, t)
    return _recharging(e, job, state, t)


def _running(e: Emitter, job: Job, state: MowerState, t: Thresholds) -> Job | None:
    if state.activity in _AT_DOCK:
        if _charging(state) and state.battery <= t.recharge_percent:
            return _replace(job, recharging_since=state.observed_at)
        _finish(e, job, state.observed_at, t)
        return None
    # Idle away from the dock: the job was abandoned (a manual drive ended, a fault was
    # cleared); nothing to tell.
    return None if state.activity == "idle" else job


def _recharging(e: Emitter, job: Job, state: MowerState, t: Thresholds) -> Job | None:
    assert job.recharging_since is not None
    if state.activity in _OUT:
        return _replace(job, recharging_since=None)
    if state.observed_at - job.recharging_since >= t.recharge_max:
        _finish(e, job, job.recharging_since, t)
        return None
    return job


def _fault(e: Emitter, fault: Fault | None, state: MowerState) -> Fault | None:
    if state.activity != "error":
        return None
    code = state.error_code or "unknown"
    if fault is None or fault.code != code:
        fault = Fault(code=code, since=state.observed_at)
    if not fault.settled:
        key = f"mower_stuck:{e.watch.mower_id}:error:{code}:{_iso(fault.since)}"
        if e.lasting("mower_stuck", key, "mower_stuck.error", {"error_code": code}):
            fault = _replace(fault, settled=True)
    return fault


def _distance_m(anchor: Anchor, lat: float, lon: float) -> float:
    north = math.radians(lat - anchor.lat) * _EARTH_M
    east = math.radians(lon - anchor.lon) * _EARTH_M * math.cos(math.radians(lat))
    return math.hypot(north, east)


def _standstill(
    e: Emitter, anchor: Anchor | None, state: MowerState, t: Thresholds
) -> Anchor | None:
    if state.activity != "mowing":
        return None
    pos, at = state.position, state.observed_at
    if pos is None:
        return anchor  # no position, no judgement: the anchor waits for the next one
    if anchor is None or _distance_m(anchor, pos.lat, pos.lon) >= t.stuck_distance_m:
        return Anchor(lat=pos.lat, lon=pos.lon, at=at)
    if not anchor.settled and at - anchor.at >= t.stuck:
        key = f"mower_stuck:{e.watch.mower_id}:standstill:{_iso(anchor.at)}"
        params: dict[str, Param] = {"stuck_seconds": _seconds(at - anchor.at)}
        if e.lasting("mower_stuck", key, "mower_stuck.standstill", params):
            anchor = _replace(anchor, settled=True)
    return anchor


def _battery(
    e: Emitter, armed_at: datetime | None, state: MowerState, t: Thresholds
) -> datetime | None:
    if armed_at is None:
        return state.observed_at if state.battery >= t.battery_rearm_percent else None
    if state.battery < t.battery_low_percent and not _charging(state):
        key = f"battery_low:{e.watch.mower_id}:{_iso(armed_at)}"
        if e.lasting("battery_low", key, "battery_low", {"battery": state.battery}):
            return None
    return armed_at


def _tell_offline(e: Emitter, offline: Offline | None) -> Offline | None:
    """Send (or hold) what is due about an offline episode: its start, or its end."""
    if offline is None:
        return None
    m = e.watch.mower_id
    if offline.ended_at is not None:
        key = f"mower_online:{m}:{_iso(offline.since)}"
        params: dict[str, Param] = {"offline_seconds": _seconds(offline.ended_at - offline.since)}
        return None if e.lasting("mower_online", key, "mower_online", params) else offline
    if offline.told or offline.quiet:
        return offline
    key = f"mower_offline:{m}:{_iso(offline.since)}"
    message = f"mower_offline.{offline.cause}"
    if e.lasting("mower_offline", key, message, {"since": _iso(offline.since)}):
        return _replace(offline, told=True)
    return offline


def _lost(offline: Offline | None, new: Offline) -> Offline:
    """The episode after contact is lost: a new one, or the told one whose end is owed."""
    if offline is not None and offline.ended_at is not None:
        return _replace(offline, ended_at=None)
    return new


def _contact(offline: Offline | None, at: datetime) -> Offline | None:
    """The episode after contact came back at ``at``."""
    if offline is None or offline.ended_at is not None:
        return offline
    return _replace(offline, ended_at=at) if offline.told else None


_STATE_KINDS: tuple[Kind, ...] = (
    "job_started",
    "mowing_finished",
    "mower_stuck",
    "battery_low",
    "mower_offline",
    "mower_online",
    "left_area",
    "theft_suspected",
)


def evaluate_state(
    watch: MowerWatch | None,
    state: MowerState,
    now: datetime,
    thresholds: Thresholds,
    placement: Placement | None = None,
) -> Outcome[MowerWatch | None]:
    """The watch and events after ``state``; ``now`` is when the service handles it.

    ``placement`` is where the state's position lies against the mower's site's areas
    (``rules/geofence.py``); None: no position, or nothing to judge it by."""
    at = state.observed_at
    if at - now > thresholds.max_clock_skew:
        return Outcome(watch, ignored="from_the_future")
    # Compared by the ints: a ``uuid.UUID``'s ``__eq__`` is a Python call, once per state.
    if watch is None or watch.account_id.int != state.account_id.int:
        return _first(state, now, thresholds, placement, watch)
    if at <= watch.observed_at:
        # Older or repeated (a redelivery, a heartbeat of a lost link): no contact.
        return Outcome(watch, ignored="not_newer")
    t, e = thresholds, Emitter(watch, thresholds.cooldown, at)
    disconnected_at = watch.disconnected_at
    if disconnected_at is not None and at > disconnected_at:
        disconnected_at = None  # a newer state is a reconnect, whatever the link events say
    offline = watch.offline
    if state.activity == "offline":
        if offline is None or offline.ended_at is not None:
            offline = _lost(offline, Offline(since=at, cause="state"))
    else:
        offline = _contact(offline, at)
    job = _job(e, watch.job, state, t)
    fault = _fault(e, watch.fault, state)
    anchor = _standstill(e, watch.anchor, state, t)
    armed_at = _battery(e, watch.battery_armed_at, state, t)
    offline = _tell_offline(e, offline)
    escape = watch.escape
    if escape is not None or (placement is not None and placement.outside_m > 0.0):
        escape = left_area(e, escape, state, placement, t.geofence)
    flight = theft(e, watch.flight, watch.fix, state, t.geofence)
    fix = moved(watch.fix, state)
    last_sent, held = e.settle(_STATE_KINDS)
    return e.outcome(
        _replace(
            watch,
            observed_at=at,
            contact_at=max(now, watch.contact_at),
            activity=state.activity,
            battery=state.battery,
            job=job,
            battery_armed_at=armed_at,
            fault=fault,
            anchor=anchor,
            disconnected_at=disconnected_at,
            offline=offline,
            last_sent=last_sent,
            held=held,
            escape=escape,
            fix=fix,
            flight=flight,
        )
    )


# -- links and silence -------------------------------------------------------------


def evaluate_link(watch: MowerWatch, link: Link, at: datetime) -> Outcome[MowerWatch]:
    """The watch after ``mower.connected``/``mower.disconnected`` occurred at ``at``.

    Applies only when newer than the watch's newest state and link event. A disconnect
    starts the grace that ``evaluate_silence`` judges; a connect cancels it. Neither is
    contact: only a newer state ends an offline episode (a link that comes back without
    the mower reporting would otherwise flap online and offline again).
    """
    known = watch.observed_at if watch.link_at is None else max(watch.observed_at, watch.link_at)
    if at <= known:
        return Outcome(watch)
    disconnected_at = at if link == "disconnected" else None
    return Outcome(_replace(watch, link_at=at, disconnected_at=disconnected_at))


def _in_episode(watch: MowerWatch) -> bool:
    return watch.offline is not None and watch.offline.ended_at is None


def evaluate_silence(
    watch: MowerWatch, now: datetime, consuming_since: datetime, thresholds: Thresholds
) -> Outcome[MowerWatch]:
    """The watch and events of the offline timer at ``now``.

    ``consuming_since`` is when this service last (re)started consuming states: silence
    before it is the service's, not the mower's.
    """
    t, e = thresholds, Emitter(watch, thresholds.cooldown, now)
    offline = watch.offline
    if not _in_episode(watch):
        lost: Offline | None = None
        if (
            watch.disconnected_at is not None
            and now >= max(watch.disconnected_at, consuming_since) + t.offline_grace
        ):
            lost = Offline(since=watch.disconnected_at, cause="link")
        elif now >= max(watch.contact_at, consuming_since) + t.offline_after:
            lost = Offline(since=watch.observed_at, cause="silence")
        if lost is not None:
            offline = _lost(offline, lost)
    offline = _tell_offline(e, offline)
    last_sent, held = e.settle(("mower_offline", "mower_online"))
    if offline == watch.offline and not e.events and held == watch.held:
        return e.outcome(watch)
    return e.outcome(_replace(watch, offline=offline, last_sent=last_sent, held=held))


def silence_due(
    watch: MowerWatch, thresholds: Thresholds, consuming_since: datetime | None = None
) -> datetime | None:
    """When ``evaluate_silence`` may next change the watch; None: not before a new state.

    Stored with the watch (``silence_due_at``), it lets the offline scan take only the
    watches that are due. A mower known to be offline costs the scan nothing.
    """
    t = thresholds
    since = watch.contact_at if consuming_since is None else max(watch.contact_at, consuming_since)
    due: list[datetime] = []
    offline = watch.offline
    if not _in_episode(watch):
        due.append(since + t.offline_after)
        if watch.disconnected_at is not None:
            start = watch.disconnected_at
            if consuming_since is not None:
                start = max(start, consuming_since)
            due.append(start + t.offline_grace)
    if offline is not None:
        # Something about the episode is held back: due when its cooldown is over.
        kind = "mower_online" if offline.ended_at is not None else "mower_offline"
        last = watch.last_sent.get(kind)
        if kind in watch.held and last is not None:
            due.append(last + t.cooldown)
    return min(due) if due else None
