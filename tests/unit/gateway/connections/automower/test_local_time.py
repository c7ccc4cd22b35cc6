"""Mower-local timestamps of the Automower Connect API as instants, across DST changes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from mowdeck.gateway.connections.automower.local_time import local_instant, local_wall_time

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def wall_ms(*parts: int) -> int:
    """Milliseconds since 1970-01-01T00:00 of a wall clock showing ``parts``."""
    return (datetime(*parts) - datetime(1970, 1, 1)) // timedelta(milliseconds=1)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("wall", "zone", "instant"),
    [
        ((2026, 1, 15, 19, 0), BERLIN, datetime(2026, 1, 15, 18, 0, tzinfo=UTC)),
        ((2026, 7, 15, 19, 0), BERLIN, datetime(2026, 7, 15, 17, 0, tzinfo=UTC)),
        # The last hour before and the first after the spring change (29 March 2026).
        ((2026, 3, 29, 1, 59), BERLIN, datetime(2026, 3, 29, 0, 59, tzinfo=UTC)),
        ((2026, 3, 29, 3, 0), BERLIN, datetime(2026, 3, 29, 1, 0, tzinfo=UTC)),
        # 02:30 does not exist that night: read with the offset before the change.
        ((2026, 3, 29, 2, 30), BERLIN, datetime(2026, 3, 29, 1, 30, tzinfo=UTC)),
        # 02:30 happens twice on 25 October 2026: the first of the two.
        ((2026, 10, 25, 2, 30), BERLIN, datetime(2026, 10, 25, 0, 30, tzinfo=UTC)),
        ((2026, 10, 25, 3, 30), BERLIN, datetime(2026, 10, 25, 2, 30, tzinfo=UTC)),
        ((2026, 11, 1, 0, 30), NEW_YORK, datetime(2026, 11, 1, 4, 30, tzinfo=UTC)),
        ((2026, 11, 1, 12, 0), NEW_YORK, datetime(2026, 11, 1, 17, 0, tzinfo=UTC)),
    ],
    ids=[
        "winter",
        "summer",
        "before-spring-change",
        "after-spring-change",
        "skipped-hour",
        "repeated-hour",
        "after-autumn-change",
        "new-york-before",
        "new-york-after",
    ],
)
def test_a_wall_time_in_the_mower_s_zone_is_the_right_instant(
    wall: tuple[int, ...], zone: ZoneInfo, instant: datetime
) -> None:
    assert local_instant(wall_ms(*wall), zone) == instant


def test_the_same_wall_time_is_an_hour_apart_in_utc_across_the_change() -> None:
    before = local_instant(wall_ms(2026, 3, 28, 19, 0), BERLIN)
    after = local_instant(wall_ms(2026, 3, 29, 19, 0), BERLIN)
    assert before is not None
    assert after is not None
    assert after - before == timedelta(hours=23)


@pytest.mark.parametrize("ms", [0, -1, 10**18], ids=["none", "negative", "beyond-9999"])
def test_no_time_is_none(ms: int) -> None:
    assert local_instant(ms, BERLIN) is None
    assert local_wall_time(ms) is None


def test_a_wall_time_without_a_zone_stays_naive() -> None:
    assert local_wall_time(wall_ms(2026, 7, 15, 19, 0)) == datetime(2026, 7, 15, 19, 0)
