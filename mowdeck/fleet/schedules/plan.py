"""What the scheduler and an operator's override do to one mower's schedule: pure
decisions over its state at ``now`` (no I/O, no clock).

1. A slot's start: held back (a restriction on its site, a park), skipped when fewer than
   ``MIN_LATE_START`` remain (it was missed while no scheduler ran), else started for the
   time that remains; a slot already decided is never started again.
2. A slot's end: the mower returns to its dock.
3. A park docks the mower now and ends the slot it mows in; a restriction does the same to
   every mower of its site mowing in a slot; a resume lifts a park.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from mowdeck.fleet.schedules.slots import Slot, Task, following

__all__ = [
    "MIN_LATE_START",
    "Decision",
    "Due",
    "Hold",
    "Order",
    "Restriction",
    "ScheduleState",
    "SlotRecord",
    "decide_due",
    "decide_park",
    "decide_resume",
    "dock_for_restriction",
    "first_due",
    "held_because",
    "next_start",
]

MIN_LATE_START = timedelta(minutes=10)
# A start this much after its slot's start is recorded as late.
_LATE = timedelta(minutes=1)
HoldKind = Literal["park_until_next_schedule", "park_until_further_notice"]


@dataclass(frozen=True, slots=True)
class Due:
    """The next thing the scheduler does for a mower: a slot's start or its end."""

    kind: Literal["start", "end"]
    slot: Slot

    @property
    def at(self) -> datetime:
        """When it is due."""
        return self.slot.start if self.kind == "start" else self.slot.end


@dataclass(frozen=True, slots=True)
class Hold:
    """An operator's park: until the next scheduled start (``until``) or further notice."""

    kind: HoldKind
    until: datetime | None = None


@dataclass(frozen=True, slots=True)
class Restriction:
    """A site's restriction (rain, frost, an event, ...) until ``until``."""

    restriction_id: uuid.UUID
    site_id: uuid.UUID
    reason: str
    until: datetime
    created_at: datetime
    created_by: str


@dataclass(frozen=True, slots=True)
class ScheduleState:
    """A mower's schedule as the scheduler reads it (``decided``: the state recorded for
    the due slot, when one was)."""

    mower_id: uuid.UUID
    account_id: uuid.UUID
    enabled: bool
    tasks: list[Task]
    zone: ZoneInfo
    due: Due | None
    hold: Hold | None = None
    restriction: Restriction | None = None
    decided: str | None = None


@dataclass(frozen=True, slots=True)
class SlotRecord:
    """What became of a slot: started, ended, held, skipped, parked or interrupted."""

    start: datetime
    end: datetime
    task: int
    state: str
    reason: str | None = None
    command_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class Order:
    """A command to issue: ``start_mow`` (area, minutes) or ``return_to_dock``."""

    kind: Literal["start_mow", "return_to_dock"]
    duration_min: int | None = None
    work_area: str | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    """A slot to record, a command to issue, the next due and the hold from now on."""

    slot: SlotRecord | None
    order: Order | None
    due: Due | None
    hold: Hold | None


def first_due(tasks: list[Task], zone: ZoneInfo, now: datetime) -> Due | None:
    """The due of a schedule stored at ``now``: the first slot not over (it may run)."""
    slot = following(tasks, zone, after=now - timedelta(days=2), ending_after=now)
    return None if slot is None else Due("start", slot)


def _next(state: ScheduleState, slot: Slot, now: datetime) -> Due | None:
    found = following(state.tasks, state.zone, after=slot.start, ending_after=now)
    return None if found is None else Due("start", found)


def held_because(state: ScheduleState, slot_start: datetime, now: datetime) -> str | None:
    """Why a slot starting at ``slot_start`` is held back at ``now`` (None: it is not)."""
    if state.restriction is not None and state.restriction.until > now:
        return f"restricted: {state.restriction.reason}"
    if state.hold is not None:
        if state.hold.kind == "park_until_further_notice":
            return "parked until further notice"
        if state.hold.until is not None and slot_start < state.hold.until:
            return "parked until the next scheduled start"
    return None


def decide_due(state: ScheduleState, now: datetime) -> Decision:  # noqa: PLR0911 - one per outcome
    """What to do for the due slot event at ``now`` (it is due: ``due.at <= now``)."""
    due, hold = state.due, state.hold
    if due is None or not state.enabled:
        return Decision(None, None, None, hold)
    slot = due.slot
    if due.kind == "end":
        record = SlotRecord(slot.start, slot.end, slot.task, "ended")
        return Decision(record, Order("return_to_dock"), _next(state, slot, now), hold)
    if state.decided is not None:  # decided before: never a second start
        if state.decided == "started" and slot.end > now:
            return Decision(None, None, Due("end", slot), hold)
        return Decision(None, None, _next(state, slot, now), hold)
    reason = held_because(state, slot.start, now)
    if reason is not None:
        record = SlotRecord(slot.start, slot.end, slot.task, "held", reason)
        return Decision(record, None, _next(state, slot, now), hold)
    left = slot.end - now
    if left < MIN_LATE_START:
        minutes = max(int(left.total_seconds() // 60), 0)
        why = f"missed: {minutes} min were left when a scheduler reached it (10 needed)"
        record = SlotRecord(slot.start, slot.end, slot.task, "skipped", why)
        return Decision(record, None, _next(state, slot, now), hold)
    late = now - slot.start
    note = f"started {int(late.total_seconds() // 60)} min late" if late >= _LATE else None
    minutes = min(math.ceil(left.total_seconds() / 60), 1440)
    record = SlotRecord(slot.start, slot.end, slot.task, "started", note)
    order = Order("start_mow", minutes, slot.work_area)
    return Decision(record, order, Due("end", slot), hold)


def _interrupt(state: ScheduleState, now: datetime, stop: str, reason: str) -> Decision:
    due = state.due
    if due is None or due.kind != "end" or due.slot.end <= now:
        return Decision(None, None, due, state.hold)
    slot = due.slot
    record = SlotRecord(slot.start, slot.end, slot.task, stop, reason)
    return Decision(record, Order("return_to_dock"), _next(state, slot, now), state.hold)


def decide_park(state: ScheduleState, kind: HoldKind, now: datetime) -> Decision:
    """An operator's park: dock now, end the slot it mows in, hold back what ``kind`` says."""
    text = kind.replace("_", " ")
    decision = _interrupt(state, now, "parked", text)
    until = None
    if kind == "park_until_next_schedule" and decision.due is not None:
        until = decision.due.slot.start
    return replace(decision, order=Order("return_to_dock"), hold=Hold(kind, until))


def decide_resume(state: ScheduleState) -> Decision:
    """Lift a park: the next slot starts as scheduled."""
    return Decision(None, None, state.due, None)


def dock_for_restriction(state: ScheduleState, restriction: Restriction, now: datetime) -> Decision:
    """A new restriction of the mower's site: dock it if it mows in a slot now."""
    return _interrupt(state, now, "interrupted", f"restricted: {restriction.reason}")


def next_start(state: ScheduleState, now: datetime, limit: int = 200) -> datetime | None:
    """When the mower will next start by its schedule, given what holds it back now."""
    if not state.enabled or state.due is None:
        return None
    if state.hold is not None and state.hold.kind == "park_until_further_notice":
        return None
    slot: Slot | None = state.due.slot
    if state.due.kind == "end" and slot is not None:
        slot = following(state.tasks, state.zone, after=slot.start, ending_after=now)
    for _ in range(limit):
        if slot is None:
            return None
        at = max(slot.start, now)
        if held_because(state, slot.start, at) is None and slot.end - at >= MIN_LATE_START:
            return at
        slot = following(state.tasks, state.zone, after=slot.start, ending_after=now)
    return None
