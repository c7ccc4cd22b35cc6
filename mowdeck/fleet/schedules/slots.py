"""A weekly schedule's slots in real time: pure, no clock (``now`` is a parameter).

A task is a local start time, a duration and week days in a time zone. Its slot on a day
starts at that local time; a start in an hour skipped by daylight-saving time runs at the
first valid minute after it, a start in a repeated hour runs once (at its first
occurrence). A slot lasts its duration in elapsed time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

__all__ = ["DAYS", "Slot", "Task", "following", "local_start", "slots_from", "week_overlaps"]

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_WEEK = 7 * 1440


@dataclass(frozen=True, slots=True)
class Task:
    """One line of a weekly schedule (``days`` as 0 = Monday ... 6 = Sunday)."""

    start: time
    duration_minutes: int
    days: frozenset[int]
    work_area: str | None = None


@dataclass(frozen=True, slots=True)
class Slot:
    """One occurrence of a task: ``start`` and ``end`` in UTC; ``task`` its index."""

    start: datetime
    end: datetime
    task: int
    work_area: str | None = None


def _exists(naive: datetime, zone: ZoneInfo) -> bool:
    there = naive.replace(tzinfo=zone).astimezone(UTC).astimezone(zone)
    return there.replace(tzinfo=None) == naive


def local_start(day: date, at: time, zone: ZoneInfo) -> datetime:
    """The UTC instant a task starting at local ``at`` on ``day`` starts.

    In a skipped hour: the first valid local minute after ``at``. In a repeated hour: its
    first occurrence (fold 0), so it starts once.
    """
    naive = datetime.combine(day, at)
    minute = timedelta(minutes=1)
    # At most the longest gap in the time zone database (a day, at a date line move).
    for _ in range(24 * 60 + 1):
        if _exists(naive, zone):
            return naive.replace(tzinfo=zone, fold=0).astimezone(UTC)
        naive = (naive + minute).replace(second=0, microsecond=0)
    raise ValueError(f"no valid local time after {day} {at} in {zone.key}")  # pragma: no cover


def slots_from(tasks: list[Task], zone: ZoneInfo, begin: datetime, days: int = 9) -> list[Slot]:
    """Every slot whose local day is from the day before ``begin`` for ``days`` days, in
    start order (callers filter by time)."""
    first = begin.astimezone(zone).date() - timedelta(days=1)
    found: list[Slot] = []
    for offset in range(days):
        day = first + timedelta(days=offset)
        for index, task in enumerate(tasks):
            if day.weekday() in task.days:
                start = local_start(day, task.start, zone)
                end = start + timedelta(minutes=task.duration_minutes)
                found.append(Slot(start, end, index, task.work_area))
    found.sort(key=lambda s: (s.start, s.task))
    return found


def following(
    tasks: list[Task], zone: ZoneInfo, *, after: datetime, ending_after: datetime
) -> Slot | None:
    """The first slot starting after ``after`` that ends after ``ending_after`` (None for
    a schedule without tasks or days)."""
    if not tasks or not any(t.days for t in tasks):
        return None
    begin = max(after, ending_after - timedelta(days=1))
    # Two weeks always hold the next slot of a task on at least one day a week.
    for slot in slots_from(tasks, zone, begin, days=16):
        if slot.start > after and slot.end > ending_after:
            return slot
    return None  # pragma: no cover - a task with days has a slot every week


def week_overlaps(tasks: list[Task]) -> tuple[int, int] | None:
    """The first two tasks (by index) whose local times overlap in the week, also across
    midnight and from Sunday to Monday; None when none do."""
    spans: list[tuple[int, int, int]] = []  # (begin, end) in minutes of the week, task
    for index, task in enumerate(tasks):
        minute = task.start.hour * 60 + task.start.minute
        for day in sorted(task.days):
            begin = day * 1440 + minute
            end = begin + task.duration_minutes
            spans.append((begin, end, index))
            if end > _WEEK:  # runs into the next week's Monday
                spans.append((begin - _WEEK, end - _WEEK, index))
    spans.sort()
    for i, (_, ends, one) in enumerate(spans):
        for other_begin, _, other in spans[i + 1 :]:
            if other_begin >= ends:
                break
            return (min(one, other), max(one, other))
    return None
