"""The automower mapping: the vendor's recorded payloads (tests/fixtures/automower) as
states, and commands as API requests judged by the attributes that follow."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

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
    command_kind,
)
from mowdeck.gateway.connections.automower import mapping
from mowdeck.gateway.connections.port import CommandOutcome
from simulator.automower.protocol import (
    Metadata,
    MowerAttributes,
    MowerPart,
    ProtocolError,
    decode_event,
    decode_snapshot,
)

FIXTURES = Path(__file__).parents[4] / "fixtures" / "automower"
MOWER = uuid.UUID("00000000-0000-4000-8000-000000000001")
ACCOUNT = uuid.UUID("00000000-0000-4000-8000-00000000acc1")
NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)
HIGH = "c7233734-b219-4287-a173-08e3643f89f0"


def snapshot(name: str) -> dict[str, MowerAttributes]:
    return decode_snapshot((FIXTURES / name).read_bytes()).by_id()


def event(name: str) -> object:
    found = decode_event((FIXTURES / "events" / name).read_bytes())
    assert found is not None
    return found


def attrs(activity: str = "MOWING", state: str = "IN_OPERATION", **kw: object) -> MowerAttributes:
    part = MowerPart(mode="MAIN_AREA", activity=activity, state=state, **kw)  # type: ignore[arg-type]
    return MowerAttributes(mower=part, metadata=Metadata(connected=True))


def as_state(a: MowerAttributes):  # type: ignore[no-untyped-def]
    return mapping.state(a, mower_id=MOWER, account_id=ACCOUNT, now=NOW)


def test_a_recorded_snapshot_is_a_state_with_the_rest_in_raw() -> None:
    s = as_state(snapshot("high_feature_mower.json")[HIGH])
    assert s.activity == "docked"
    assert s.battery == 100
    assert not s.charging
    assert s.connection == "automower-cloud"
    assert s.blade_height_mm == 35  # level 4
    assert s.error_code is None
    assert s.position is not None
    assert (s.position.lat, s.position.lon) == (35.5402913, -82.5527055)
    assert s.raw["automower.state"] == "RESTRICTED"
    assert s.raw["automower.inactive_reason"] == "PLANNING"
    assert s.raw["automower.planner"] == {
        "next_start_timestamp": 1685991600000,
        "next_start_local": "2023-06-05T19:00:00",
        "override_action": "NOT_ACTIVE",
        "restricted_reason": "WEEK_SCHEDULE",
        "external_reason": 6500,
    }
    assert s.raw["automower.status_timestamp"] == 1697669932683
    assert s.raw["automower.cutting_height_level"] == 4


def test_a_low_feature_mower_has_no_position_and_its_error_code() -> None:
    s = as_state(snapshot("low_feature_mower.json")["1234"])
    assert s.position is None
    assert s.blade_height_mm is None
    assert s.battery == 50
    assert s.error_code == "automower.1"
    assert s.raw["automower.error_code_timestamp"] == 1729269469000


def test_recorded_events_merge_onto_the_snapshot() -> None:
    a = snapshot("high_feature_mower.json")[HIGH]
    for name in (
        "mower_event.json",
        "battery_event.json",
        "position_event.json",
        "cutting_height_event.json",
        "planner_event.json",
    ):
        a = event(name).merged(a)  # type: ignore[attr-defined]
    s = as_state(a)
    assert s.activity == "mowing"
    assert s.battery == 77
    assert s.position is not None
    assert (s.position.lat, s.position.lon) == (57.70074, 14.4787133)
    assert s.blade_height_mm == 40  # level 5
    assert s.raw["automower.work_area_id"] == "78555"
    assert s.raw["automower.planner"]["override_action"] == "FORCE_MOW"
    # What no event reports stays as the snapshot had it.
    assert s.raw["automower.status_timestamp"] == 1697669932683


@pytest.mark.parametrize(
    ("activity", "state", "connected", "expected"),
    [
        ("MOWING", "IN_OPERATION", True, "mowing"),
        ("GOING_HOME", "IN_OPERATION", True, "returning"),
        ("CHARGING", "IN_OPERATION", True, "charging"),
        ("LEAVING", "IN_OPERATION", True, "leaving"),
        ("PARKED_IN_CS", "RESTRICTED", True, "docked"),
        ("STOPPED_IN_GARDEN", "IN_OPERATION", True, "stopped"),
        ("MOWING", "PAUSED", True, "paused"),
        ("NOT_APPLICABLE", "STOPPED", True, "stopped"),
        ("NOT_APPLICABLE", "ERROR", True, "error"),
        ("NOT_APPLICABLE", "FATAL_ERROR", True, "error"),
        ("NOT_APPLICABLE", "ERROR_AT_POWER_UP", True, "error"),
        ("NOT_APPLICABLE", "OFF", True, "offline"),
        ("MOWING", "IN_OPERATION", False, "offline"),
        ("UNKNOWN", "UNKNOWN", True, "idle"),
    ],
)
def test_activity_and_state_as_activity(
    activity: str, state: str, connected: bool, expected: str
) -> None:
    a = attrs(activity, state)
    a = msgspec.structs.replace(a, metadata=Metadata(connected=connected))
    s = as_state(a)
    assert s.activity == expected
    assert s.charging == (activity == "CHARGING")
    assert s.connection == ("automower-cloud" if connected else None)


def test_what_is_not_an_event_is_told_apart() -> None:
    assert decode_event("pong") is None
    assert decode_event(b"") is None
    with pytest.raises(ProtocolError, match="not an event"):
        decode_event(b'{"type": 1}')
    with pytest.raises(ProtocolError, match="not a mowers list"):
        decode_snapshot(b"[]")


@pytest.mark.parametrize(
    ("command", "path", "body"),
    [
        (StartMow(), "actions", {"type": "Start", "attributes": {"duration": 1440}}),
        (StartMow(duration_min=30), "actions", {"type": "Start", "attributes": {"duration": 30}}),
        (PauseMow(), "actions", {"type": "Pause"}),
        (ResumeMow(), "actions", {"type": "ResumeSchedule"}),
        # Mowdeck's calendar rules (the default): parked until Mowdeck starts it again.
        (ReturnToDock(), "actions", {"type": "ParkUntilFurtherNotice"}),
        (
            SetBladeHeight(height_mm=40),
            "settings",
            {"type": "settings", "attributes": {"cuttingHeight": 5}},
        ),
        (EmergencyStop(), "actions", {"type": "Pause"}),
    ],
)
def test_commands_as_api_requests(command: Command, path: str, body: dict[str, object]) -> None:
    p = mapping.plan(command, attrs())
    assert isinstance(p, mapping.Plan)
    assert (p.path, p.body) == (path, {"data": body})


def test_with_the_mower_s_own_calendar_a_dock_parks_until_its_next_start() -> None:
    p = mapping.plan(ReturnToDock(), attrs(), "mower")
    assert isinstance(p, mapping.Plan)
    assert p.body == {"data": {"type": "ParkUntilNextSchedule"}}
    # The calendar changes nothing else.
    assert mapping.plan(PauseMow(), attrs(), "mower") == mapping.plan(PauseMow(), attrs())


@pytest.mark.parametrize(
    "command", [SetSpeed(speed_mps=0.5), ManualDrive(linear_mps=0.2, angular_rps=0)]
)
def test_what_the_api_cannot_do_is_rejected_naming_kind_and_protocol(command: Command) -> None:
    p = mapping.plan(command, attrs())
    assert isinstance(p, CommandOutcome)
    assert p.status == "rejected"
    assert p.reason is not None
    assert p.reason.startswith(command_kind(command))
    assert "Automower Connect API" in p.reason


def test_a_blade_height_outside_the_levels_fails_saying_the_span() -> None:
    p = mapping.plan(SetBladeHeight(height_mm=90), attrs())
    assert p == CommandOutcome(
        "failed", "90 mm is outside the cutting heights the API sets (20-60 mm, levels 1-9)"
    )


@pytest.mark.parametrize(
    ("activity", "state"),
    [
        ("PARKED_IN_CS", "RESTRICTED"),
        ("CHARGING", "IN_OPERATION"),
        ("MOWING", "PAUSED"),
        ("NOT_APPLICABLE", "ERROR"),
    ],
)
def test_an_emergency_stop_of_a_still_mower_is_executed_at_once(activity: str, state: str) -> None:
    p = mapping.plan(EmergencyStop(), attrs(activity, state))
    assert isinstance(p, CommandOutcome)
    assert p.status == "executed"


@pytest.mark.parametrize(
    ("command", "after", "expected"),
    [
        (StartMow(), attrs("LEAVING"), "executed"),
        (StartMow(), attrs("PARKED_IN_CS", "RESTRICTED"), None),
        (PauseMow(), attrs("MOWING", "PAUSED"), "executed"),
        (PauseMow(), attrs("MOWING"), None),
        (ResumeMow(), attrs("PARKED_IN_CS", "RESTRICTED"), "executed"),
        (ResumeMow(), attrs("MOWING", "PAUSED"), None),
        (ReturnToDock(), attrs("GOING_HOME"), "executed"),
        (EmergencyStop(), attrs("MOWING", "PAUSED"), "executed"),
        (EmergencyStop(), attrs("MOWING", "STOPPED"), "executed"),
        (EmergencyStop(), attrs("MOWING"), None),
        (StartMow(), attrs("NOT_APPLICABLE", "ERROR", error_code=3), "failed"),
    ],
)
def test_judged_by_the_attributes_that_follow(
    command: Command, after: MowerAttributes, expected: str | None
) -> None:
    p = mapping.plan(
        command,
        attrs("MOWING")
        if isinstance(command, EmergencyStop)
        else attrs("PARKED_IN_CS", "RESTRICTED"),
    )
    assert isinstance(p, mapping.Plan)
    found = mapping.judge(p, after)
    assert (found.status if found else None) == expected


def test_a_blade_height_is_executed_when_the_level_is_reported() -> None:
    p = mapping.plan(SetBladeHeight(height_mm=40), attrs())
    assert isinstance(p, mapping.Plan)
    assert mapping.judge(p, attrs()) is None
    reported = decode_event(
        b'{"id":"x","type":"cuttingHeight-event-v2","attributes":{"cuttingHeight":{"height":5}}}'
    )
    assert reported is not None
    found = mapping.judge(p, reported.merged(attrs()))
    assert found == CommandOutcome("executed", None)


@pytest.mark.parametrize(
    ("mm", "level"), [(20, 1), (22, 1), (40, 5), (60, 9), (61, 9), (19, 1), (63, None), (17, None)]
)
def test_heights_as_levels(mm: int, level: int | None) -> None:
    assert mapping.height_level(mm) == level


def test_mower_local_times_are_instants_in_the_mower_s_zone() -> None:
    a = snapshot("low_feature_mower.json")["1234"]  # errorCodeTimestamp 2024-10-18 16:37:49
    s = mapping.state(
        a, mower_id=MOWER, account_id=ACCOUNT, now=NOW, zone=ZoneInfo("Europe/Stockholm")
    )
    assert s.raw["automower.error_code_at"] == "2024-10-18T14:37:49+00:00"
    assert "automower.error_code_local" not in s.raw
    # The raw number stays as the API gave it.
    assert s.raw["automower.error_code_timestamp"] == 1729269469000
    high = mapping.state(
        snapshot("high_feature_mower.json")[HIGH],
        mower_id=MOWER,
        account_id=ACCOUNT,
        now=NOW,
        zone=ZoneInfo("America/New_York"),
    )
    assert high.raw["automower.planner"]["next_start_at"] == "2023-06-05T23:00:00+00:00"


def test_without_a_zone_mower_local_times_stay_wall_times() -> None:
    s = as_state(snapshot("low_feature_mower.json")["1234"])
    assert s.raw["automower.error_code_local"] == "2024-10-18T16:37:49"
    assert "automower.error_code_at" not in s.raw


def test_the_model_and_the_current_work_area_are_in_raw() -> None:
    s = as_state(snapshot("high_feature_mower.json")[HIGH])
    assert s.raw["automower.model"] == "450XH-TEST"
    assert s.raw["automower.work_area_name"] == "Front lawn"


@pytest.mark.parametrize(
    ("command", "attributes"),
    [
        (StartMow(work_area="Back lawn"), {"workAreaId": 654321}),
        (StartMow(work_area=" front LAWN "), {"workAreaId": 123456}),
        (StartMow(work_area="Back lawn", duration_min=45), {"workAreaId": 654321, "duration": 45}),
    ],
    ids=["by-name", "case-and-space", "with-duration"],
)
def test_a_start_in_a_work_area_names_its_id(command: StartMow, attributes: object) -> None:
    p = mapping.plan(command, snapshot("high_feature_mower.json")[HIGH])
    assert isinstance(p, mapping.Plan)
    assert p.body == {"data": {"type": "StartInWorkArea", "attributes": attributes}}
    assert mapping.judge(p, attrs("LEAVING")) == CommandOutcome("executed", None)


@pytest.mark.parametrize(
    ("mower", "work_area", "reason"),
    [
        ("low", "Front lawn", "start_mow in work area 'Front lawn': this mower has no work areas"),
        ("high", "Orchard", "the mower has no work area named 'Orchard' (it has 'Front lawn', "),
        ("high", "", None),
    ],
    ids=["no-work-areas", "unknown-name", "main-area-has-no-name"],
)
def test_a_start_in_a_work_area_the_mower_lacks_is_rejected(
    mower: str, work_area: str, reason: str | None
) -> None:
    a = (
        snapshot("low_feature_mower.json")["1234"]
        if mower == "low"
        else snapshot("high_feature_mower.json")[HIGH]
    )
    if not work_area:
        # The contract allows no empty name; the unnamed main area cannot be asked for.
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert({"work_area": ""}, StartMow)
        return
    p = mapping.plan(StartMow(work_area=work_area), a)
    assert isinstance(p, CommandOutcome)
    assert p.status == "rejected"
    assert p.reason is not None
    assert p.reason.startswith(reason or "")


def test_a_start_in_a_disabled_work_area_is_rejected() -> None:
    a = snapshot("high_feature_mower.json")[HIGH]
    areas = [msgspec.structs.replace(w, enabled=False) for w in a.work_areas]
    p = mapping.plan(StartMow(work_area="Front lawn"), msgspec.structs.replace(a, work_areas=areas))
    assert p == CommandOutcome("rejected", "work area 'Front lawn' is disabled on the mower")
