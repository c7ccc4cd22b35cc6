"""OpenMower's messages as Mowdeck's states and commands, rule by rule."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime

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
from mowdeck.devices.openmower import Datum
from mowdeck.gateway.connections.openmower import mapping
from mowdeck.gateway.connections.port import CommandOutcome
from simulator.openmower.protocol import (
    ACTION_ABORT_DOCKING,
    ACTION_ABORT_MOWING,
    ACTION_CONTINUE,
    ACTION_PAUSE,
    ACTION_START,
    Pose,
    RobotState,
)

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
MOWER, ACCOUNT = uuid.uuid4(), uuid.uuid4()
DATUM = Datum(lat=48.0, lon=11.0)
GOOD_POSE = Pose(x=0.0, y=0.0, heading=0.0, pos_accuracy=0.02, heading_valid=True)


def robot(**fields: object) -> RobotState:
    values: dict[str, object] = {"current_state": "IDLE", "gps_percentage": 1.0, "pose": GOOD_POSE}
    values.update(fields)
    return RobotState(**values)  # type: ignore[arg-type]


def mapped(rs: RobotState, datum: Datum | None = DATUM):  # type: ignore[no-untyped-def]
    return mapping.state(rs, mower_id=MOWER, account_id=ACCOUNT, now=NOW, datum=datum)


@pytest.mark.parametrize(
    ("fields", "activity"),
    [
        ({"current_state": "IDLE"}, "idle"),
        ({"current_state": "IDLE", "is_charging": True}, "charging"),
        ({"current_state": "UNDOCKING"}, "leaving"),
        ({"current_state": "MOWING"}, "mowing"),
        ({"current_state": "PAUSED"}, "paused"),
        ({"current_state": "DOCKING"}, "returning"),
        ({"current_state": "AREA_RECORDING"}, "manual"),
        ({"current_state": "MOWING", "emergency": True}, "stopped"),
        ({"current_state": "SOMETHING_NEW"}, "idle"),
    ],
    ids=str,
)
def test_current_state_and_flags_make_the_activity(
    fields: dict[str, object], activity: str
) -> None:
    assert mapped(robot(**fields)).activity == activity


@pytest.mark.parametrize(
    ("fraction", "battery"),
    [(0.0, 0), (0.504, 50), (0.999, 100), (1.3, 100), (-0.2, 0), (math.nan, 0)],
    ids=["empty", "half", "rounded", "over", "under", "nan"],
)
def test_battery_fraction_is_a_percentage(fraction: float, battery: int) -> None:
    assert mapped(robot(battery_percentage=fraction)).battery == battery


@pytest.mark.parametrize(
    ("gps", "accuracy", "fix"),
    [(1.0, 0.02, "fixed"), (0.8, 0.2, "float"), (0.3, 1.5, "single"), (0.0, 0.02, "none")],
    ids=["fixed", "float", "single", "no-gps"],
)
def test_gps_quality_is_an_rtk_fix(gps: float, accuracy: float, fix: str) -> None:
    rs = robot(gps_percentage=gps, pose=Pose(pos_accuracy=accuracy))
    assert mapped(rs).rtk_fix == fix


def test_local_metres_become_latitude_and_longitude_from_the_datum() -> None:
    # 111.32 m north is about 0.001 degree of latitude; east shrinks with cos(latitude).
    state = mapped(robot(pose=Pose(x=100.0, y=111.32, heading=0.0, heading_valid=True)))
    assert state.position is not None
    assert state.position.lat == pytest.approx(48.001, abs=1e-5)
    assert state.position.lon == pytest.approx(
        11.0 + 100 / (111_319.5 * math.cos(math.radians(48))), abs=1e-6
    )
    assert state.position.heading_deg == pytest.approx(90.0)  # east


@pytest.mark.parametrize(
    ("radians", "degrees"),
    [(0.0, 90.0), (math.pi / 2, 0.0), (math.pi, 270.0), (-math.pi / 2, 180.0)],
    ids=["east", "north", "west", "south"],
)
def test_heading_counter_clockwise_from_east_becomes_a_compass_heading(
    radians: float, degrees: float
) -> None:
    state = mapped(robot(pose=Pose(heading=radians, heading_valid=True)))
    assert state.position is not None
    assert state.position.heading_deg == pytest.approx(degrees)


def test_without_a_datum_there_is_no_position_but_the_pose_is_kept() -> None:
    state = mapped(robot(pose=Pose(x=3.0, y=4.0)), datum=None)
    assert state.position is None
    assert state.raw["openmower.pose"]["x"] == 3.0
    assert state.raw["openmower.pose"]["y"] == 4.0


def test_an_invalid_heading_is_no_heading() -> None:
    state = mapped(robot(pose=Pose(heading=1.0, heading_valid=False)))
    assert state.position is not None
    assert state.position.heading_deg is None


def test_what_has_no_field_goes_into_raw_under_openmower_keys() -> None:
    rs = robot(
        current_state="MOWING",
        current_sub_state="",
        current_area=2,
        current_path=5,
        current_path_index=17,
        current_action_progress=0.4,
        rain_detected=True,
        emergency=True,
        gps_percentage=0.9,
    )
    raw = mapped(rs).raw
    assert raw["openmower.current_state"] == "MOWING"
    assert raw["openmower.current_area"] == 2
    assert raw["openmower.current_path"] == 5
    assert raw["openmower.current_path_index"] == 17
    assert raw["openmower.action_progress"] == 0.4
    assert raw["openmower.rain_detected"] is True
    assert raw["openmower.emergency"] is True
    assert raw["openmower.gps_percentage"] == 0.9
    assert mapped(rs).error_code == "emergency"


IDLE_ACTIONS = {ACTION_START: True, ACTION_PAUSE: False, ACTION_ABORT_MOWING: False}
MOWING_ACTIONS = {ACTION_START: False, ACTION_PAUSE: True, ACTION_ABORT_MOWING: True}
PAUSED_ACTIONS = {ACTION_CONTINUE: True, ACTION_ABORT_MOWING: True}


@pytest.mark.parametrize(
    ("command", "state", "actions", "action", "confirms"),
    [
        (StartMow(), "IDLE", IDLE_ACTIONS, ACTION_START, {"UNDOCKING", "MOWING"}),
        (PauseMow(), "MOWING", MOWING_ACTIONS, ACTION_PAUSE, {"PAUSED"}),
        (ResumeMow(), "PAUSED", PAUSED_ACTIONS, ACTION_CONTINUE, {"MOWING"}),
        (ReturnToDock(), "MOWING", MOWING_ACTIONS, ACTION_ABORT_MOWING, {"DOCKING", "IDLE"}),
        (EmergencyStop(), "MOWING", MOWING_ACTIONS, ACTION_PAUSE, {"IDLE", "PAUSED"}),
        (
            EmergencyStop(),
            "DOCKING",
            {ACTION_ABORT_DOCKING: True},
            ACTION_ABORT_DOCKING,
            {"IDLE", "PAUSED"},
        ),
    ],
    ids=["start", "pause", "continue", "dock", "stop-mowing", "stop-docking"],
)
def test_commands_are_enabled_actions(
    command: Command, state: str, actions: dict[str, bool], action: str, confirms: set[str]
) -> None:
    plan = mapping.plan(command, robot(current_state=state), actions)
    assert isinstance(plan, mapping.Plan)
    assert plan.action_id == action
    assert plan.confirms == confirms


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        (SetBladeHeight(height_mm=40), "set_blade_height is not offered by OpenMower"),
        (SetSpeed(speed_mps=0.5), "set_speed is not offered by OpenMower"),
        (StartMow(duration_min=30), "start_mow with duration_min is not offered by OpenMower"),
        (
            StartMow(work_area="Front lawn"),
            "start_mow in work area 'Front lawn' is not offered by OpenMower",
        ),
    ],
    ids=["blade", "speed", "duration", "work-area"],
)
def test_kinds_openmower_cannot_do_are_rejected(command: Command, reason: str) -> None:
    outcome = mapping.plan(command, robot(), IDLE_ACTIONS)
    assert isinstance(outcome, CommandOutcome)
    assert outcome.status == "rejected"
    assert outcome.reason is not None
    assert reason in outcome.reason
    assert "connection kind openmower" in outcome.reason


def test_an_action_not_enabled_fails_naming_what_is_enabled() -> None:
    outcome = mapping.plan(PauseMow(), robot(current_state="IDLE"), IDLE_ACTIONS)
    assert outcome == CommandOutcome(
        "failed",
        "mower_logic:mowing/pause is not enabled on the mower now "
        "(state IDLE; enabled: mower_logic:idle/start_mowing)",
    )


def test_without_actions_json_nothing_is_sent() -> None:
    outcome = mapping.plan(StartMow(), robot(), None)
    assert outcome == CommandOutcome("failed", "the mower has published no actions/json yet")


@pytest.mark.parametrize("state", ["IDLE", "PAUSED"])
def test_a_stop_of_a_mower_standing_still_is_executed_at_once(state: str) -> None:
    outcome = mapping.plan(EmergencyStop(), robot(current_state=state), {})
    assert outcome == CommandOutcome("executed", f"already stopped ({state})")


def test_a_stop_with_no_pause_on_offer_fails() -> None:
    outcome = mapping.plan(EmergencyStop(), robot(current_state="UNDOCKING"), {ACTION_PAUSE: False})
    assert isinstance(outcome, CommandOutcome)
    assert outcome.status == "failed"


def test_manual_drive_is_a_teleop_velocity_unless_the_emergency_is_latched() -> None:
    drive = ManualDrive(linear_mps=0.3, angular_rps=-0.5)
    plan = mapping.plan(drive, robot(), {})
    assert plan == mapping.Plan("teleop", velocity=(0.3, -0.5))
    latched = mapping.plan(drive, robot(emergency=True), {})
    assert latched == CommandOutcome("failed", "the mower's emergency is latched")
    zero = mapping.plan(ManualDrive(linear_mps=0, angular_rps=0), robot(emergency=True), {})
    assert isinstance(zero, mapping.Plan)  # stopping is always allowed


@pytest.mark.parametrize(
    ("fields", "status"),
    [
        ({"current_state": "MOWING"}, None),
        ({"current_state": "PAUSED"}, "executed"),
        ({"current_state": "MOWING", "emergency": True}, "failed"),
    ],
    ids=["not-yet", "confirmed", "emergency"],
)
def test_judging_a_pause_by_the_states_that_follow(
    fields: dict[str, object], status: str | None
) -> None:
    plan = mapping.Plan("action", ACTION_PAUSE, confirms=frozenset({"PAUSED"}))
    outcome = mapping.judge(plan, robot(**fields))
    assert (outcome.status if outcome else None) == status


def test_a_stop_is_confirmed_by_the_emergency_flag_too() -> None:
    plan = mapping.Plan("action", ACTION_PAUSE, confirms=mapping.STOPPED, by_emergency=True)
    outcome = mapping.judge(plan, robot(current_state="MOWING", emergency=True))
    assert outcome is not None
    assert outcome.status == "executed"


def test_unknown_numbers_map_to_nothing_rather_than_to_a_guess() -> None:
    rs = robot(
        battery_percentage=math.nan,
        gps_percentage=math.nan,
        pose=Pose(x=math.nan, y=1.0, heading=math.nan, pos_accuracy=math.nan, heading_valid=True),
    )
    state = mapped(rs)
    assert (state.battery, state.rtk_fix, state.position) == (0, "none", None)
    assert state.raw["openmower.pose"]["pos_accuracy"] is None
