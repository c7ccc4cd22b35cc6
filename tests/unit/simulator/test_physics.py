"""Mower physics with fixed clocks: battery, return, charging, stripes, dead-man, e-stop."""

from __future__ import annotations

import msgspec
import pytest

from contracts.v1 import (
    Command,
    EmergencyStop,
    ManualDrive,
    PauseMow,
    ResumeMow,
    ReturnToDock,
    SetBladeHeight,
    SetSpeed,
    StartMow,
)
from simulator.garden import Garden
from simulator.physics import Body, Params, apply_command, step

GARDEN = Garden(base_lat=48.1, base_lon=11.5, width=10.0, depth=5.0)
BIG = Garden(base_lat=48.1, base_lon=11.5, width=40.0, depth=30.0)
P = Params()
DOCK = {"x": GARDEN.dock_x, "y": GARDEN.dock_y}


def body(**kw: object) -> Body:
    return msgspec.structs.replace(Body(**DOCK), **kw)  # type: ignore[arg-type]


def run(b: Body, seconds: float, garden: Garden = GARDEN, start: float = 0.0) -> Body:
    return step(b, seconds, start + seconds, P, garden)


def test_mowing_drains_battery_at_the_mowing_rate() -> None:
    b = body(activity="mowing", job="active", x=0.0, y=0.125, battery=80.0)
    after = run(b, 100.0, BIG)
    assert after.activity == "mowing"
    assert after.battery == pytest.approx(80.0 - 100 * P.drain_mow)


def test_stripes_progress_at_the_set_speed_and_turn_at_the_lane_end() -> None:
    b = body(activity="mowing", job="active", x=0.0, y=0.125, speed_mps=0.5)
    after = run(b, 10.0, BIG)
    assert after.progress == pytest.approx(5.0)
    assert (after.x, after.heading) == (pytest.approx(5.0), 90.0)
    # Past the first lane (40 m) and its turn: heading west on the second lane.
    after = run(b, 90.0, BIG)
    assert after.heading == 270.0
    assert after.y == pytest.approx(0.375)


@pytest.mark.parametrize(
    ("battery", "expected"),
    [(15.5, "returning"), (16.0, "mowing")],
    ids=["crosses-15-percent-returns", "above-threshold-keeps-mowing"],
)
def test_low_battery_returns_to_dock_keeping_the_job(battery: float, expected: str) -> None:
    b = body(activity="mowing", job="active", x=0.0, y=0.125, battery=battery)
    after = run(b, 20.0, BIG)  # 20 s drain 0.56 %
    assert after.activity == expected
    assert after.job == "active"


def test_return_then_charge_then_resume_the_unfinished_job() -> None:
    b = body(activity="returning", job="active", x=3.0, y=3.0, battery=14.0, progress=50.0)
    b = run(b, 30.0)
    assert (b.activity, b.charging) == ("charging", True)
    assert (b.x, b.y) == (GARDEN.dock_x, GARDEN.dock_y)
    charging_time = (P.resume_level - b.battery) / P.charge_rate
    b = run(b, charging_time - 5.0, start=30.0)
    assert b.activity == "charging"
    b = run(b, 10.0, start=30.0 + charging_time)
    assert (b.activity, b.charging, b.progress) == ("leaving", False, 50.0)


def test_charging_without_a_job_ends_docked_and_full() -> None:
    after = run(body(activity="charging", charging=True, battery=90.0), 1000.0)
    assert (after.activity, after.charging, after.battery) == ("docked", False, 100.0)


def test_start_with_duration_ends_the_job_after_that_time() -> None:
    b, reason = apply_command(body(battery=100.0), StartMow(duration_min=1), 0.0, P)
    assert reason is None
    b = step(b, 59.0, 59.0, P, BIG)
    assert b.activity == "mowing"
    b = step(b, 2.0, 61.0, P, BIG)
    assert (b.activity, b.job) == ("returning", "none")


def test_finished_pattern_returns_and_ends_the_job() -> None:
    b = body(activity="mowing", job="active", progress=GARDEN.path_length - 1.0)
    after = run(b, 5.0)
    assert (after.activity, after.job) == ("returning", "none")


@pytest.mark.parametrize(
    ("at", "moving"),
    [(0.4, True), (1.5, False)],
    ids=["within-ttl-moves", "after-ttl-stops"],
)
def test_manual_drive_dead_man_stops_after_ttl(at: float, moving: bool) -> None:
    b, _ = apply_command(
        body(activity="idle", x=5.0, y=2.0, heading=90.0),
        ManualDrive(linear_mps=0.5, angular_rps=0.0, ttl_ms=1000),
        0.0,
        P,
    )
    b = step(b, at, at, P, GARDEN)
    assert (b.activity == "manual") is moving
    later = step(b, 1.0, at + 1.0, P, GARDEN)
    # Never further than 1 s of driving, however long after the deadline.
    assert later.x <= 5.0 + 0.5 + 1e-9
    assert (later.x > b.x) is moving


def test_dead_man_ttl_counts_wall_time_under_speedup() -> None:
    fast = msgspec.structs.replace(P, speedup=100.0)
    b, _ = apply_command(
        body(activity="idle", x=5.0, y=2.0),
        ManualDrive(linear_mps=0.1, angular_rps=0.0, ttl_ms=500),
        0.0,
        fast,
    )
    assert b.manual_until == pytest.approx(50.0)


def test_manual_drive_out_of_the_garden_is_an_error() -> None:
    b, _ = apply_command(
        body(activity="idle", x=11.0, y=2.0, heading=90.0),
        ManualDrive(linear_mps=1.0, angular_rps=0.0, ttl_ms=2000),
        0.0,
        P,
    )
    b = run(b, 3.0)
    assert (b.activity, b.error_code) == ("error", "outside_area")


def test_stuck_freezes_position_then_errors() -> None:
    b = body(activity="mowing", job="active", x=1.0, y=0.125, stuck=True)
    b = run(b, P.stuck_error_after - 1.0, BIG)
    assert (b.activity, b.x) == ("mowing", 1.0)
    b = run(b, 2.0, BIG, start=P.stuck_error_after - 1.0)
    assert (b.activity, b.error_code, b.x) == ("error", "stuck", 1.0)


def test_dead_man_stops_a_stuck_manual_drive_instead_of_erroring() -> None:
    b, _ = apply_command(
        body(activity="idle", x=5.0, y=2.0, stuck=True),
        ManualDrive(linear_mps=0.5, angular_rps=0.0, ttl_ms=1000),
        0.0,
        P,
    )
    b = run(b, 0.5)
    assert (b.activity, b.x) == ("manual", 5.0)  # wheels spin, position stays
    b = run(b, 1.0, start=0.5)
    assert (b.activity, b.manual_linear, b.stuck_since) == ("idle", 0.0, None)
    b = run(b, P.stuck_error_after + 5.0, start=1.5)
    assert (b.activity, b.error_code) == ("idle", None)


MOWING = body(activity="mowing", job="active", x=1.0, y=0.125)
STOPPED = body(activity="stopped", job="held", x=1.0, y=0.125)
ERROR = body(activity="error", error_code="lifted", x=1.0, y=0.125)

CASES: list[tuple[str, Body, Command, str, str | None]] = [
    ("estop-while-mowing", MOWING, EmergencyStop(), "stopped", None),
    (
        "estop-latches-against-manual",
        STOPPED,
        ManualDrive(linear_mps=0.5, angular_rps=0),
        "stopped",
        "latched",
    ),
    ("estop-released-by-resume", STOPPED, ResumeMow(), "leaving", None),
    ("estop-released-by-start", STOPPED, StartMow(), "leaving", None),
    ("estop-released-by-return", STOPPED, ReturnToDock(), "returning", None),
    ("estop-no-job-resume-goes-idle", body(activity="stopped"), ResumeMow(), "idle", None),
    ("pause-mowing", MOWING, PauseMow(), "paused", None),
    ("pause-when-docked-fails", body(), PauseMow(), "docked", "nothing to pause"),
    ("resume-without-job-fails", body(activity="idle"), ResumeMow(), "idle", "no job"),
    (
        "start-low-battery-charges-first",
        body(activity="docked", battery=50.0),
        StartMow(),
        "charging",
        None,
    ),
    ("return-from-mowing", MOWING, ReturnToDock(), "returning", None),
    ("error-refuses-start", ERROR, StartMow(), "error", "in error"),
    ("error-still-takes-estop", ERROR, EmergencyStop(), "error", None),
    ("blade-height-any-time", STOPPED, SetBladeHeight(height_mm=55), "stopped", None),
    ("speed-any-time", MOWING, SetSpeed(speed_mps=1.2), "mowing", None),
]


@pytest.mark.parametrize(
    ("before", "command", "activity", "failure"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_command_effects(
    before: Body, command: Command, activity: str, failure: str | None
) -> None:
    after, reason = apply_command(before, command, 10.0, P)
    assert after.activity == activity
    if failure is None:
        assert reason is None
    else:
        assert reason is not None
        assert failure in reason


def test_estop_stops_motion_immediately_and_stays_stopped() -> None:
    b, _ = apply_command(MOWING, EmergencyStop(reason="child on lawn"), 0.0, P)
    later = run(b, 600.0, BIG)
    assert (later.activity, later.x, later.y, later.job) == ("stopped", 1.0, 0.125, "held")


def test_settings_commands_change_the_body() -> None:
    b, _ = apply_command(MOWING, SetBladeHeight(height_mm=70), 0.0, P)
    b, _ = apply_command(b, SetSpeed(speed_mps=1.0), 0.0, P)
    assert (b.blade_height_mm, b.speed_mps) == (70, 1.0)
    assert run(b, 10.0, BIG).progress == pytest.approx(10.0)


def test_paused_mower_resumes_mowing_from_where_it_was() -> None:
    b, _ = apply_command(msgspec.structs.replace(MOWING, progress=1.0), PauseMow(), 0.0, P)
    b = run(b, 100.0, BIG)
    assert (b.activity, b.progress, b.job) == ("paused", 1.0, "held")
    b, reason = apply_command(b, ResumeMow(), 100.0, P)
    assert reason is None
    b = step(b, 2.0, 102.0, P, BIG)  # one slice to reach the stripe, one to mow
    assert b.activity == "mowing"
    assert b.progress > 1.0
