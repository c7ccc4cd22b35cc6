"""What the schedule API answers."""

from __future__ import annotations

import uuid
from datetime import datetime

import msgspec

from mowdeck.fleet.schedules.plan import Restriction, ScheduleState, SlotRecord
from mowdeck.fleet.schedules.rules import TaskSpec

__all__ = [
    "OverrideView",
    "RestrictedView",
    "RestrictionList",
    "RestrictionView",
    "ScheduleView",
    "SlotView",
    "restricted_of",
    "restriction_view",
    "slot_view",
]


class RestrictedView(msgspec.Struct, frozen=True, kw_only=True):
    """Why a mower's schedule does not start it: a restriction's reason, a park or
    ``disabled``; and until when (null: until lifted)."""

    reason: str
    until: datetime | None


class SlotView(msgspec.Struct, frozen=True, kw_only=True):
    """A slot the scheduler decided: started, ended, held, skipped, parked or
    interrupted, with the reason and the command it issued last."""

    start: datetime
    end: datetime
    task: int
    state: str
    reason: str | None
    command_id: uuid.UUID | None


class ScheduleView(msgspec.Struct, frozen=True, kw_only=True):
    """A mower's schedule with its next start and what holds it back."""

    mower_id: uuid.UUID
    site_id: uuid.UUID | None  # the site whose time zone and restrictions rule it
    enabled: bool
    timezone: str
    tasks: list[TaskSpec]
    next_start: datetime | None
    restricted: RestrictedView | None
    recent_slots: list[SlotView]
    updated_at: datetime


class OverrideView(msgspec.Struct, frozen=True, kw_only=True):
    """An override applied: to how many mowers, and the dock commands it issued."""

    override: str
    mowers: int
    command_ids: list[uuid.UUID]


class RestrictionView(msgspec.Struct, frozen=True, kw_only=True):
    """A site's restriction; ``docked``: the commands that docked mowers mowing then."""

    restriction_id: uuid.UUID
    site_id: uuid.UUID
    reason: str
    until: datetime
    created_at: datetime
    created_by: str
    docked: list[uuid.UUID] = msgspec.field(default_factory=list)


class RestrictionList(msgspec.Struct, frozen=True, kw_only=True):
    """A site's restrictions that have not ended, by end."""

    restrictions: list[RestrictionView]


def restricted_of(state: ScheduleState, now: datetime) -> RestrictedView | None:
    """Why the schedule does not start the mower now (None: nothing holds it back)."""
    r, hold = state.restriction, state.hold
    if not state.enabled:
        return RestrictedView(reason="disabled", until=None)
    if r is not None and r.until > now:
        return RestrictedView(reason=r.reason, until=r.until)
    if hold is not None and hold.kind == "park_until_further_notice":
        return RestrictedView(reason=hold.kind, until=None)
    if hold is not None and hold.until is not None and hold.until > now:
        return RestrictedView(reason=hold.kind, until=hold.until)
    return None


def slot_view(slot: SlotRecord) -> SlotView:
    """A recorded slot as shown."""
    return SlotView(
        start=slot.start,
        end=slot.end,
        task=slot.task,
        state=slot.state,
        reason=slot.reason,
        command_id=slot.command_id,
    )


def restriction_view(r: Restriction, docked: list[uuid.UUID] | None = None) -> RestrictionView:
    """A restriction as shown."""
    return RestrictionView(
        restriction_id=r.restriction_id,
        site_id=r.site_id,
        reason=r.reason,
        until=r.until,
        created_at=r.created_at,
        created_by=r.created_by,
        docked=docked or [],
    )
