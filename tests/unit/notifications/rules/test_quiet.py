"""Quiet hours in the user's time zone: across midnight, across daylight saving changes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from mowdeck.notifications.rules.kinds import SEVERITY, Kind, Severity
from mowdeck.notifications.rules.quiet import (
    QuietHours,
    held_by_quiet_hours,
    in_quiet_hours,
    quiet_hours_end,
)

NIGHT = QuietHours(start="22:00", end="07:00")
LUNCH = QuietHours(start="12:00", end="14:00")
EARLY = QuietHours(start="01:00", end="02:30")
LATE = QuietHours(start="23:00", end="06:00")
SECOND = timedelta(seconds=1)


def utc(text: str) -> datetime:
    """An instant written ``YYYY-MM-DD HH:MM[:SS]`` in UTC."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# (quiet hours, zone, instant in UTC, quiet?, end in UTC or None)
CASES = [
    # Berlin in winter (UTC+1) and summer (UTC+2).
    (NIGHT, "Europe/Berlin", "2026-01-15 20:59", False, None),
    (NIGHT, "Europe/Berlin", "2026-01-15 21:00", True, "2026-01-16 06:00"),
    (NIGHT, "Europe/Berlin", "2026-01-16 05:59", True, "2026-01-16 06:00"),
    (NIGHT, "Europe/Berlin", "2026-01-16 06:00", False, None),
    (NIGHT, "Europe/Berlin", "2026-07-15 19:59", False, None),
    (NIGHT, "Europe/Berlin", "2026-07-15 20:00", True, "2026-07-16 05:00"),
    (NIGHT, "Europe/Berlin", "2026-07-16 04:59", True, "2026-07-16 05:00"),
    (NIGHT, "Europe/Berlin", "2026-07-16 05:00", False, None),
    # The nights the clocks change: forward on 2026-03-29, back on 2026-10-25 (01:00 UTC).
    (NIGHT, "Europe/Berlin", "2026-03-28 21:00", True, "2026-03-29 05:00"),
    (NIGHT, "Europe/Berlin", "2026-03-29 04:59", True, "2026-03-29 05:00"),
    (NIGHT, "Europe/Berlin", "2026-10-24 20:00", True, "2026-10-25 06:00"),
    (NIGHT, "Europe/Berlin", "2026-10-25 05:59", True, "2026-10-25 06:00"),
    # An end inside the skipped hour (02:00 to 03:00 does not exist): the quiet ends at
    # the jump, 03:00 summer time.
    (EARLY, "Europe/Berlin", "2026-03-29 00:30", True, "2026-03-29 01:00"),
    (EARLY, "Europe/Berlin", "2026-03-29 01:00", False, None),
    # An end inside the repeated hour: the first pass ends at the first 02:30, and the
    # second pass, quiet again by its wall-clock time, at the second.
    (EARLY, "Europe/Berlin", "2026-10-25 00:10", True, "2026-10-25 00:30"),
    (EARLY, "Europe/Berlin", "2026-10-25 00:45", False, None),
    (EARLY, "Europe/Berlin", "2026-10-25 01:10", True, "2026-10-25 01:30"),
    # Across midnight where the UTC date differs from the local one.
    (NIGHT, "Asia/Tokyo", "2026-05-01 12:59", False, None),
    (NIGHT, "Asia/Tokyo", "2026-05-01 13:00", True, "2026-05-01 22:00"),
    (NIGHT, "Asia/Tokyo", "2026-05-01 21:59", True, "2026-05-01 22:00"),
    (LATE, "America/New_York", "2026-07-01 03:30", True, "2026-07-01 10:00"),
    (LATE, "America/New_York", "2026-07-01 09:59", True, "2026-07-01 10:00"),
    (LATE, "America/New_York", "2026-07-01 10:00", False, None),
    # A window within one day.
    (LUNCH, "Europe/Berlin", "2026-07-15 09:59", False, None),
    (LUNCH, "Europe/Berlin", "2026-07-15 10:00", True, "2026-07-15 12:00"),
    (LUNCH, "Europe/Berlin", "2026-07-15 12:00", False, None),
    (LUNCH, "UTC", "2026-07-15 12:00", True, "2026-07-15 14:00"),
    # No quiet hours at all.
    (None, "Europe/Berlin", "2026-07-15 23:00", False, None),
]
IDS = [
    "berlin-winter-just-before",
    "berlin-winter-start",
    "berlin-winter-last-minute",
    "berlin-winter-end",
    "berlin-summer-just-before",
    "berlin-summer-start",
    "berlin-summer-last-minute",
    "berlin-summer-end",
    "berlin-spring-forward-night",
    "berlin-spring-forward-last-minute",
    "berlin-fall-back-night",
    "berlin-fall-back-last-minute",
    "end-in-the-skipped-hour",
    "after-the-skipped-hour",
    "end-in-the-repeated-hour-first-pass",
    "between-the-passes",
    "end-in-the-repeated-hour-second-pass",
    "tokyo-just-before",
    "tokyo-start-on-the-previous-utc-day",
    "tokyo-last-minute",
    "new-york-across-midnight",
    "new-york-last-minute",
    "new-york-after",
    "lunch-before",
    "lunch-start",
    "lunch-end",
    "lunch-in-utc",
    "no-quiet-hours",
]


@pytest.mark.parametrize(("quiet", "zone", "instant", "expected", "end"), CASES, ids=IDS)
def test_quiet_hours(
    quiet: QuietHours | None, zone: str, instant: str, expected: bool, end: str | None
) -> None:
    at = utc(instant)
    assert in_quiet_hours(quiet, zone, at) is expected
    ends = quiet_hours_end(quiet, zone, at)
    if not expected:
        assert ends is None
    else:
        assert end is not None
        assert ends == utc(end)
        # The end is the first instant that is not quiet.
        assert not in_quiet_hours(quiet, zone, ends)
        assert in_quiet_hours(quiet, zone, ends - SECOND)


SEVERITIES = [
    (NIGHT, "critical", False),
    (NIGHT, "warning", True),
    (NIGHT, "info", True),
    (QuietHours(start="22:00", end="07:00", allow_critical=False), "critical", True),
    (None, "warning", False),
]


@pytest.mark.parametrize(
    ("quiet", "severity", "held"),
    SEVERITIES,
    ids=["critical-let-through", "warning-held", "info-held", "critical-held-if-asked", "none"],
)
def test_held_by_quiet_hours(quiet: QuietHours | None, severity: Severity, held: bool) -> None:
    assert held_by_quiet_hours(quiet, "Europe/Berlin", utc("2026-07-15 22:00"), severity) is held


def test_outside_quiet_hours_nothing_is_held() -> None:
    assert not held_by_quiet_hours(NIGHT, "Europe/Berlin", utc("2026-07-15 12:00"), "info")


@pytest.mark.parametrize("kind", ["left_area", "theft_suspected"])
def test_a_geofence_event_is_critical_and_passes_quiet_hours_where_allowed(kind: Kind) -> None:
    at = utc("2026-07-15 23:30")
    assert not held_by_quiet_hours(NIGHT, "Europe/Berlin", at, SEVERITY[kind])
    strict = QuietHours(start="22:00", end="07:00", allow_critical=False)
    assert held_by_quiet_hours(strict, "Europe/Berlin", at, SEVERITY[kind])
