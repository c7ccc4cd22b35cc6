"""The pure date_bin mirror, step parsing and query limits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from mowdeck.telemetry.bins import (
    bin_count,
    bin_start,
    check_range,
    downsample,
    parse_step,
    round_mean,
)
from mowdeck.telemetry.errors import QueryLimitError
from mowdeck.telemetry.model import HistoryRow, PositionRow
from tests.unit.telemetry.samples import at


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5s", timedelta(seconds=5)),
        ("1m", timedelta(minutes=1)),
        ("15m", timedelta(minutes=15)),
        ("1h", timedelta(hours=1)),
        ("1d", timedelta(days=1)),
    ],
    ids=["seconds", "minute", "minutes", "hour", "day"],
)
def test_parse_step(text: str, expected: timedelta) -> None:
    assert parse_step(text) == expected


@pytest.mark.parametrize("text", ["", "0s", "5", "s", "1w", "-1h", "1.5h", "5 s", "1H"], ids=repr)
def test_parse_step_refuses(text: str) -> None:
    with pytest.raises(QueryLimitError):
        parse_step(text)


@pytest.mark.parametrize(
    ("moment", "step", "expected"),
    [
        (
            datetime(2026, 5, 1, 12, 0, 7, tzinfo=UTC),
            "5s",
            datetime(2026, 5, 1, 12, 0, 5, tzinfo=UTC),
        ),
        (
            datetime(2026, 5, 1, 12, 59, 59, 999999, tzinfo=UTC),
            "1h",
            datetime(2026, 5, 1, 12, tzinfo=UTC),
        ),
        (datetime(2026, 5, 1, 12, 0, tzinfo=UTC), "1h", datetime(2026, 5, 1, 12, tzinfo=UTC)),
        # 7 days from 2000-01-01 (a Saturday): weeks start on Saturdays.
        (datetime(2026, 5, 1, tzinfo=UTC), "7d", datetime(2026, 4, 25, tzinfo=UTC)),
        (
            datetime(1999, 12, 31, 23, 59, 58, tzinfo=UTC),
            "5s",
            datetime(1999, 12, 31, 23, 59, 55, tzinfo=UTC),
        ),
        (
            datetime(2026, 5, 1, 12, 0, 7, tzinfo=UTC),
            "7s",
            datetime(2026, 5, 1, 12, 0, 3, tzinfo=UTC),
        ),
    ],
    ids=["5s", "end-of-hour", "on-boundary", "week-from-origin", "before-origin", "odd-step"],
)
def test_bin_start(moment: datetime, step: str, expected: datetime) -> None:
    assert bin_start(moment, parse_step(step)) == expected


@pytest.mark.parametrize("step", ["7s", "13m", "5h"])
def test_bins_of_every_step_are_counted_from_2000_utc(step: str) -> None:
    # As date_bin in the SQL: a step that divides no day still starts a bin at the origin.
    width = parse_step(step)
    origin = datetime(2000, 1, 1, tzinfo=UTC)
    assert bin_start(origin + width - timedelta(microseconds=1), width) == origin
    assert bin_start(origin + 1000 * width + timedelta(seconds=1), width) == origin + 1000 * width


@pytest.mark.parametrize(
    ("total", "count", "expected"),
    [(5, 2, 3), (3, 2, 2), (7, 2, 4), (10, 4, 3), (0, 3, 0), (200, 3, 67)],
    ids=["2.5-up", "1.5-up", "3.5-up", "2.5-up-again", "zero", "66.7"],
)
def test_round_mean_is_half_up(total: int, count: int, expected: int) -> None:
    assert round_mean(total, count) == expected


def test_limits() -> None:
    start = at(0)
    check_range(start, start + timedelta(days=31), parse_step("1h"), max_days=31, max_rows=5000)
    with pytest.raises(QueryLimitError, match="31 days"):
        check_range(start, start + timedelta(days=31, seconds=1), None, max_days=31, max_rows=5000)
    with pytest.raises(QueryLimitError, match="bins"):
        check_range(start, start + timedelta(days=1), parse_step("5s"), max_days=31, max_rows=5000)
    with pytest.raises(QueryLimitError, match="after"):
        check_range(start, start, None, max_days=31, max_rows=5000)
    assert bin_count(start, start + timedelta(days=31), parse_step("1h")) == 744


def _row(seconds: float, battery: int, **fields: object) -> HistoryRow:
    values: dict[str, object] = {
        "activity": "mowing",
        "charging": False,
        "rtk_fix": "fixed",
        "rtk_source": None,
        "connection": None,
        "blade_height_mm": None,
        "speed_mps": None,
        "error_code": None,
    }
    values.update(fields)
    return HistoryRow(observed_at=at(seconds), battery=battery, **values)  # type: ignore[arg-type]


def test_downsample_aggregates_per_bin() -> None:
    rows = [
        _row(0, 80),
        _row(2, 79, charging=True),
        _row(4, 77, activity="paused", error_code="E2"),
        _row(5, 50),
    ]
    points = [
        PositionRow(observed_at=at(1), lat=1.0, lon=1.0, heading_deg=None, rtk_fix="fixed"),
        PositionRow(observed_at=at(3), lat=2.0, lon=2.0, heading_deg=90.0, rtk_fix="fixed"),
        PositionRow(observed_at=at(12), lat=3.0, lon=3.0, heading_deg=None, rtk_fix="fixed"),
    ]
    bins = downsample(rows, points, parse_step("5s"))
    assert [b.bin for b in bins] == [at(0), at(5)]
    first = bins[0]
    assert (first.activity, first.error_code, first.battery) == ("paused", "E2", 79)
    assert (first.battery_min, first.battery_max, first.charging, first.samples) == (
        77,
        80,
        True,
        3,
    )
    assert first.position is not None
    assert (first.position.lat, first.position.heading_deg) == (2.0, 90.0)
    assert bins[1].position is None  # the 12 s point is in a bin without history
