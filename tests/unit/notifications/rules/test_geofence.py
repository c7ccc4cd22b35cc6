"""The geofence rules (``left_area``, ``theft_suspected``) as scripts at fixed times.

Where a state lies against its site's areas is handed to the rules as a ``Placement``
(the step's ``placement`` field), as the watch actors do; no geometry here.
"""

from __future__ import annotations

from typing import Any

import pytest

from mowdeck.notifications.rules.geofence import INSIDE, Placement
from tests.unit.notifications.samples import METRE, Step, run
from tests.unit.notifications.samples import S as State


def S(seconds: float, **fields: Any) -> Step:
    """A state at ``seconds``: moving a metre north a second, so it is never stuck."""
    fields.setdefault("lat", 52.5 + seconds * METRE)
    return State(seconds, **fields)


def inside(seconds: float, **fields: Any) -> Step:
    """A mowing state inside the site's areas."""
    return S(seconds, activity="mowing", placement=INSIDE, **fields)


def out(seconds: float, metres: float, zone: str | None = None, **fields: Any) -> Step:
    """A mowing state ``metres`` outside (or, with ``zone``, inside that stay-out zone)."""
    fields.setdefault("activity", "mowing")
    return S(seconds, placement=Placement(metres, zone), **fields)


def carried(seconds: float, metres: float, activity: str = "idle") -> Step:
    """A state ``metres`` north of the start, not mowing."""
    return State(seconds, activity=activity, lat=52.5 + metres * METRE)


CASES: list[tuple[str, list[Step], list[str]]] = [
    # left_area
    (
        "outside-far-for-longer-than-the-time-is-told-once",
        [inside(0), out(10, 8), out(30, 9), out(41, 10), out(60, 12), out(400, 12)],
        ["left_area.outside@41"],
    ),
    ("outside-but-near-is-never-told", [inside(0), out(10, 3), out(100, 4.9)], []),
    (
        "outside-long-but-near-until-it-goes-farther",
        [inside(0), out(10, 3), out(100, 4), out(101, 6)],
        ["left_area.outside@101"],
    ),
    (
        "back-inside-before-the-time-starts-again",
        [inside(0), out(10, 8), inside(30), out(35, 8), out(60, 8)],
        [],
    ),
    (
        "a-new-escape-is-held-by-the-cooldown-then-told",
        [inside(0), out(10, 8), out(41, 8), inside(50), out(60, 8), out(100, 8), out(341, 8)],
        ["left_area.outside@41", "left_area.outside@341"],
    ),
    (
        "a-held-escape-that-ended-is-not-told",
        [
            inside(0),
            out(10, 8),
            out(41, 8),
            inside(50),
            out(60, 8),
            out(100, 8),
            inside(200),
            inside(400),
        ],
        ["left_area.outside@41"],
    ),
    (
        "in-a-stay-out-zone-names-it",
        [inside(0), out(10, 6, "pond"), out(40, 6, "pond")],
        ["left_area.stay_out@40"],
    ),
    (
        "at-the-dock-counts-as-inside",
        [inside(0), out(10, 50, activity="docked"), out(100, 50, activity="charging")],
        [],
    ),
    (
        "a-state-without-position-keeps-the-escape",
        [inside(0), out(10, 8), S(30, activity="mowing", lat=None), out(41, 8)],
        ["left_area.outside@41"],
    ),
    ("the-first-state-outside-is-old-news", [out(0, 50), out(100, 50)], []),
    (
        "an-offline-state-is-not-judged",
        [inside(0), out(10, 8), out(20, 8, activity="offline"), out(41, 8)],
        ["mower_offline.state@20", "mower_online@41", "left_area.outside@41"],
    ),
    # theft_suspected
    (
        "carried-away-fast-while-idle-is-told-once",
        [carried(0, 0), carried(1, 10), carried(2, 20), carried(3, 30), carried(4, 40)],
        ["theft_suspected@2"],
    ),
    (
        "lifted-and-carried-while-in-error",
        [carried(0, 0, "stopped"), carried(2, 12, "stopped"), carried(4, 24, "stopped")],
        ["theft_suspected@4"],
    ),
    (
        "one-fast-move-is-no-theft",
        [carried(0, 0), carried(1, 30), carried(20, 31), carried(40, 32)],
        [],
    ),
    ("a-jump-of-the-fix-and-back-is-no-theft", [carried(0, 0), carried(1, 30), carried(2, 0)], []),
    (
        "mowing-fast-is-no-theft",
        [carried(0, 0, "mowing"), carried(1, 10, "mowing"), carried(2, 20, "mowing")],
        [],
    ),
    ("walking-pace-is-no-theft", [carried(s, 2.5 * s) for s in range(30)], []),
    (
        "fast-but-not-far-is-no-theft",
        [carried(0, 0), carried(1, 5), carried(2, 10), carried(3, 10), carried(30, 11)],
        [],
    ),
    (
        # The first move after standing still is measured from when the mower got there
        # (a heartbeat does not move the fix), so it is slow: the flight starts after it.
        "after-the-dock-a-new-theft-is-told-after-the-cooldown",
        [
            carried(0, 0),
            carried(1, 10),
            carried(2, 20),
            carried(100, 20, "docked"),
            carried(400, 20),
            carried(401, 30),
            carried(402, 40),
            carried(403, 50),
        ],
        ["theft_suspected@2", "theft_suspected@403"],
    ),
]


@pytest.mark.parametrize(("steps", "sent"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_script_sends(steps: list[Step], sent: list[str]) -> None:
    assert run(steps).sent == sent


def test_left_area_says_how_far_and_how_long() -> None:
    trace = run([inside(0), out(10, 8), out(45, 12.4)])
    (event,) = trace.events
    assert (event.kind, event.severity) == ("left_area", "critical")
    assert event.params == {"distance_m": 12, "outside_seconds": 35}
    assert event.dedupe_key.endswith(":2026-05-01T12:00:10+00:00")


def test_theft_says_how_far_and_how_fast() -> None:
    trace = run([carried(0, 0), carried(1, 10), carried(2, 20)])
    (event,) = trace.events
    assert (event.kind, event.severity) == ("theft_suspected", "critical")
    assert event.params["distance_m"] == 20
    assert event.params["speed_kmh"] == pytest.approx(36.0, abs=0.5)


def test_the_first_state_outside_is_reported_suppressed() -> None:
    assert "left_area:first_state@0" in run([out(0, 50)]).held


def test_the_first_state_outside_opens_its_alarm_untold() -> None:
    trace = run([out(0, 50), out(10, 50)])
    assert trace.events == []
    assert trace.alarms == ["raised:left_area@0"]


def test_an_idle_mowers_heartbeats_leave_the_watch_alone() -> None:
    # Same position: the last fix keeps its time, so a heartbeat changes only the clock.
    first = run([carried(0, 0)]).watch
    after = run([carried(10, 0)], watch=first).watch
    assert first is not None and after is not None
    assert (after.fix, after.flight, after.escape) == (first.fix, None, None)


def test_a_position_that_wanders_less_than_a_metre_keeps_the_fix() -> None:
    first = run([carried(0, 0, "docked")]).watch
    after = run([carried(10, 0.3, "docked"), carried(20, 0.6, "docked")], watch=first).watch
    assert first is not None and after is not None
    assert after.fix == first.fix
    moved = run([carried(30, 1.5, "idle")], watch=after).watch
    assert moved is not None and moved.fix is not None and moved.fix.at != first.observed_at


ALARMS: list[tuple[str, list[Step], list[str]]] = [
    (
        "left-area-raised-when-told-cleared-back-inside",
        [inside(0), out(10, 8), out(41, 8), out(60, 9), inside(70)],
        ["raised:left_area@41", "cleared:left_area@70"],
    ),
    (
        "left-area-cleared-at-the-dock",
        [inside(0), out(10, 8), out(41, 8), out(60, 0, activity="docked")],
        ["raised:left_area@41", "cleared:left_area@60"],
    ),
    (
        "theft-raised-when-told-cleared-at-the-dock",
        [carried(0, 0), carried(1, 10), carried(2, 20), carried(30, 21), carried(90, 0, "docked")],
        ["raised:theft_suspected@2", "cleared:theft_suspected@90"],
    ),
    ("an-untold-escape-raises-nothing", [inside(0), out(10, 8), inside(20)], []),
]


@pytest.mark.parametrize(("steps", "alarms"), [c[1:] for c in ALARMS], ids=[c[0] for c in ALARMS])
def test_alarms(steps: list[Step], alarms: list[str]) -> None:
    assert run(steps).alarms == alarms
