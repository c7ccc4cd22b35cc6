"""The schedule API's bodies and their checks (pure): tasks, time zones, overlaps."""

from __future__ import annotations

import uuid
from datetime import datetime, time
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec

from contracts.v1 import AwareDatetime
from mowdeck.fleet.errors import InvalidRequestError
from mowdeck.fleet.schedules.slots import DAYS, Task, week_overlaps

__all__ = [
    "OverrideRequest",
    "RestrictionRequest",
    "ScheduleRequest",
    "TaskSpec",
    "spec_of",
    "tasks_of",
    "zone_of",
]

Day = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
Override = Literal["park_until_next_schedule", "park_until_further_notice", "resume_schedule"]
MAX_TASKS = 50


class TaskSpec(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One task: a local start (``HH:MM``), a duration and the week days it runs on."""

    start: Annotated[str, msgspec.Meta(pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$")]
    duration_minutes: Annotated[int, msgspec.Meta(ge=1, le=1440)]
    days: Annotated[list[Day], msgspec.Meta(min_length=1, max_length=7)]
    work_area: Annotated[str, msgspec.Meta(min_length=1, max_length=100)] | None = None


class ScheduleRequest(msgspec.Struct, frozen=True, kw_only=True):
    """Body of ``PUT /v1/mowers/{id}/schedule``; ``timezone`` only for a mower without a
    site (a site's time zone rules its mowers)."""

    enabled: bool
    tasks: Annotated[list[TaskSpec], msgspec.Meta(max_length=MAX_TASKS)]
    timezone: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] | None = None


class OverrideRequest(msgspec.Struct, frozen=True, kw_only=True):
    """Body of the override routes: park until the next start, until further notice, or
    resume the schedule."""

    override: Override


class RestrictionRequest(msgspec.Struct, frozen=True, kw_only=True):
    """Body of ``POST /v1/sites/{id}/restrictions``: why (``rain``, ``frost``, ``event`` or
    any text) and until when."""

    reason: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    until: AwareDatetime


def zone_of(name: str, field: str = "timezone") -> ZoneInfo:
    """The IANA time zone ``name``; ``InvalidRequestError`` naming ``field`` otherwise."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidRequestError(field, f"`{field}`: {name!r} is no IANA time zone") from None


def tasks_of(specs: list[TaskSpec]) -> list[Task]:
    """The tasks of a request; a 422 names a repeated day or two overlapping tasks."""
    tasks: list[Task] = []
    for index, spec in enumerate(specs):
        if len(set(spec.days)) != len(spec.days):
            raise InvalidRequestError(f"tasks.{index}.days", f"`tasks[{index}].days` repeats a day")
        hour, minute = spec.start.split(":")
        days = frozenset(DAYS.index(d) for d in spec.days)
        tasks.append(
            Task(time(int(hour), int(minute)), spec.duration_minutes, days, spec.work_area)
        )
    clash = week_overlaps(tasks)
    if clash is not None:
        a, b = clash
        raise InvalidRequestError(
            f"tasks.{b}",
            f"`tasks[{a}]` and `tasks[{b}]` overlap (a mower mows one task at a time)",
        )
    return tasks


def spec_of(task: Task) -> TaskSpec:
    """A task as the API shows it."""
    return TaskSpec(
        start=f"{task.start.hour:02d}:{task.start.minute:02d}",
        duration_minutes=task.duration_minutes,
        days=[DAYS[d] for d in sorted(task.days)],  # type: ignore[misc]
        work_area=task.work_area,
    )


def restriction_until(request: RestrictionRequest, now: datetime) -> datetime:
    """The end of a new restriction; it must lie in the future."""
    if request.until <= now:
        raise InvalidRequestError("until", "`until` must lie in the future")
    return request.until


def new_id() -> uuid.UUID:
    """A new restriction or command id."""
    return uuid.uuid4()
