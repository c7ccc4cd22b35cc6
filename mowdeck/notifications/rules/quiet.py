"""Quiet hours: whether an instant falls in a user's quiet hours, and when they end.

Quiet hours are wall-clock times in the user's IANA time zone, so they follow daylight
saving: 22:00 to 07:00 in Europe/Berlin is 20:00 to 05:00 UTC in summer and 21:00 to
06:00 UTC in winter. A window whose end is not after its start runs past midnight. An
instant is quiet when its local wall-clock time is in ``[start, end)``. On the night
the clocks go back the repeated hour is quiet or not by its wall-clock time, like any
other; on the night they go forward an end in the skipped hour ends the quiet at the
jump.

ADR 0022 keeps an inbox item made in quiet hours and queues no delivery for it. Beyond
the ADR, ``allow_critical`` (on by default) lets a critical event through anyway: a
stuck mower in the middle of the night is what the owner would want to be woken for,
and it is the one kind that can cost a garden or a mower.
"""

from __future__ import annotations

import zoneinfo
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from typing import Annotated
from zoneinfo import ZoneInfo

import msgspec

from mowdeck.notifications.rules.kinds import Severity

__all__ = ["QuietHours", "held_by_quiet_hours", "in_quiet_hours", "quiet_hours_end", "zone"]

Clock = Annotated[str, msgspec.Meta(pattern=r"^([01]\d|2[0-3]):[0-5]\d$")]
"""A wall-clock time ``HH:MM``, 24 hours."""


class QuietHours(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Local times between which nothing is pushed; the end may be past midnight."""

    start: Clock
    end: Clock
    # A critical event (a stuck mower) is delivered even in quiet hours.
    allow_critical: bool = True


@lru_cache(maxsize=512)
def zone(name: str) -> zoneinfo.ZoneInfo:
    """The IANA time zone ``name``; ``KeyError`` or ``ValueError`` when there is none."""
    return zoneinfo.ZoneInfo(name)


def _clock(text: str) -> time:
    hours, minutes = text.split(":")
    return time(int(hours), int(minutes))


def _crosses_midnight(start: time, end: time) -> bool:
    return end <= start


def in_quiet_hours(quiet: QuietHours | None, timezone: str, at: datetime) -> bool:
    """Whether ``at`` falls in the quiet hours, read in the time zone ``timezone``."""
    if quiet is None:
        return False
    start, end = _clock(quiet.start), _clock(quiet.end)
    if start == end:
        return False  # an empty window (preferences refuse it)
    local = at.astimezone(zone(timezone)).time().replace(tzinfo=None)
    if _crosses_midnight(start, end):
        return local >= start or local < end
    return start <= local < end


def held_by_quiet_hours(
    quiet: QuietHours | None, timezone: str, at: datetime, severity: Severity
) -> bool:
    """Whether an event of ``severity`` at ``at`` waits for the end of the quiet hours."""
    if quiet is not None and severity == "critical" and quiet.allow_critical:
        return False
    return in_quiet_hours(quiet, timezone, at)


def quiet_hours_end(quiet: QuietHours | None, timezone: str, at: datetime) -> datetime | None:
    """When the quiet hours ``at`` falls in end (UTC); None when ``at`` is not quiet."""
    if quiet is None or not in_quiet_hours(quiet, timezone, at):
        return None
    tz = zone(timezone)
    start, end = _clock(quiet.start), _clock(quiet.end)
    local = at.astimezone(tz)
    day = local.date()
    if _crosses_midnight(start, end) and local.time().replace(tzinfo=None) >= start:
        day += timedelta(days=1)
    return _first_instant_at(day, end, tz, after=at)


def _wall(instant: datetime, tz: ZoneInfo) -> datetime:
    return instant.astimezone(tz).replace(tzinfo=None)


def _first_instant_at(day: date, clock: time, tz: ZoneInfo, after: datetime) -> datetime:
    """The first instant after ``after`` whose wall-clock time in ``tz`` reaches ``clock``
    on ``day``: the wall time itself, the later of the two on the night the clocks go
    back if the first is past, or the jump when the clocks skip over it."""
    wall = datetime.combine(day, clock)
    candidates = sorted(wall.replace(tzinfo=tz, fold=fold).astimezone(UTC) for fold in (0, 1))
    for instant in candidates:
        if instant > after and _wall(instant, tz) == wall:
            return instant
    # The wall time does not exist (the clocks jumped over it): the end is the first
    # instant whose wall time is past it, found to the second between the two readings.
    low, high = candidates
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) / 2
        if _wall(middle, tz) >= wall:
            high = middle
        else:
            low = middle
    return high.replace(microsecond=0) if _wall(high.replace(microsecond=0), tz) >= wall else high
