"""The Automower Connect API's mower-local timestamps as instants.

Some of the API's times are milliseconds since 1970-01-01T00:00 *of the mower's wall
clock* (``planner.nextStartTimestamp``, ``mower.errorCodeTimestamp``, a work area's
``lastTimeCompleted``), not since the Unix epoch: the mower knows no time zone, only the
time its owner set. Read as UTC they are off by the zone's offset, by one hour more or
less across a change of daylight saving time. ``metadata.statusTimestamp`` is a true
Unix time and needs none of this.

Wall times that a change of daylight saving time makes ambiguous (the hour that repeats
in autumn) are read as the first of the two; times it skips (the hour lost in spring) are
read with the offset before the change, as ``zoneinfo`` does with ``fold=0``. Pure: no
clock.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

__all__ = ["local_instant", "local_wall_time"]

_EPOCH = datetime(1970, 1, 1)  # noqa: DTZ001 - a wall clock's origin, deliberately naive
_MAX_MS = 253_402_300_799_000  # 9999-12-31T23:59:59: beyond it no datetime exists


def local_wall_time(ms: int) -> datetime | None:
    """``ms`` as the naive wall time it counts to; None for 0 (the API's "none")."""
    if ms <= 0 or ms > _MAX_MS:
        return None
    return _EPOCH + timedelta(milliseconds=ms)


def local_instant(ms: int, zone: ZoneInfo) -> datetime | None:
    """``ms`` of the mower's wall clock in ``zone`` as a UTC instant; None for 0."""
    wall = local_wall_time(ms)
    if wall is None:
        return None
    return wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
