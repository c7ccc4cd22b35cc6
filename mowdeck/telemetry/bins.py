"""Downsampling arithmetic: a pure mirror of PostgreSQL's ``date_bin`` from 2000-01-01 UTC."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from contracts.v1 import Position
from mowdeck.telemetry.errors import QueryLimitError
from mowdeck.telemetry.model import HistoryBin, HistoryRow, PositionRow

__all__ = [
    "ORIGIN",
    "bin_count",
    "bin_start",
    "check_range",
    "downsample",
    "parse_step",
    "round_mean",
]

ORIGIN = datetime(2000, 1, 1, tzinfo=UTC)
_STEP = re.compile(r"^([1-9][0-9]{0,6})([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_MICROS = 1_000_000


def parse_step(text: str) -> timedelta:
    """``5s``, ``1m``, ``1h`` or ``1d`` as a timedelta; anything else is a ``QueryLimitError``."""
    match = _STEP.match(text)
    if match is None:
        raise QueryLimitError(f"step {text!r} must be a positive number and s, m, h or d")
    return timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])


def _micros(delta: timedelta) -> int:
    return (delta.days * 86400 + delta.seconds) * _MICROS + delta.microseconds


def bin_start(at: datetime, step: timedelta) -> datetime:
    """The start of the bin holding ``at`` (``date_bin(step, at, ORIGIN)``)."""
    size = _micros(step)
    offset = _micros(at - ORIGIN)
    return ORIGIN + timedelta(microseconds=offset - offset % size)


def bin_count(start: datetime, end: datetime, step: timedelta) -> int:
    """How many bins ``[start, end)`` touches."""
    if end <= start:
        return 0
    first = bin_start(start, step)
    return -(-_micros(end - first) // _micros(step))


def check_range(
    start: datetime,
    end: datetime,
    step: timedelta | None,
    *,
    max_days: int,
    max_rows: int,
) -> None:
    """Refuse an empty or inverted range, one longer than ``max_days``, or too many bins."""
    if end <= start:
        raise QueryLimitError("`to` must be after `from`")
    if end - start > timedelta(days=max_days):
        raise QueryLimitError(f"the range may span at most {max_days} days")
    if step is not None and bin_count(start, end, step) > max_rows:
        raise QueryLimitError(
            f"step {step} needs {bin_count(start, end, step)} bins; at most {max_rows} are allowed"
        )


def round_mean(total: int, count: int) -> int:
    """The mean of non-negative integers rounded half up, as PostgreSQL's ``round(avg())``."""
    return (2 * total + count) // (2 * count)


def downsample(
    rows: Sequence[HistoryRow], positions: Sequence[PositionRow], step: timedelta
) -> list[HistoryBin]:
    """One point per bin that holds history rows, exactly as the PostgreSQL query computes it."""
    by_bin: dict[datetime, list[HistoryRow]] = {}
    for row in sorted(rows, key=lambda r: r.observed_at):
        by_bin.setdefault(bin_start(row.observed_at, step), []).append(row)
    last_position: dict[datetime, PositionRow] = {}
    for track_point in sorted(positions, key=lambda p: p.observed_at):
        last_position[bin_start(track_point.observed_at, step)] = track_point
    result = []
    for start in sorted(by_bin):
        members = by_bin[start]
        last = members[-1]
        batteries = [m.battery for m in members]
        point: PositionRow | None = last_position.get(start)
        result.append(
            HistoryBin(
                bin=start,
                activity=last.activity,
                rtk_fix=last.rtk_fix,
                error_code=last.error_code,
                battery=round_mean(sum(batteries), len(batteries)),
                battery_min=min(batteries),
                battery_max=max(batteries),
                charging=any(m.charging for m in members),
                samples=len(members),
                position=None
                if point is None
                else Position(lat=point.lat, lon=point.lon, heading_deg=point.heading_deg),
            )
        )
    return result
