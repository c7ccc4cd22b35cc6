"""The simulator's states as the Automower Connect API's attributes, and its local times."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from contracts.v1 import MowerState, Position
from contracts.v1.telemetry import Activity
from mowdeck.gateway.connections.automower import mapping
from mowdeck.gateway.connections.automower.local_time import local_instant
from simulator.automower.bridge import attributes_of, wall_ms
from simulator.automower.protocol import MowerAttributes, decode_event

NOW = datetime(2026, 7, 15, 12, tzinfo=UTC)


def sim_state(activity: Activity, error_code: str | None = None) -> MowerState:
    return MowerState(
        mower_id=uuid.uuid4(),
        account_id=uuid.uuid4(),
        observed_at=NOW,
        activity=activity,
        battery=80,
        blade_height_mm=45,
        error_code=error_code,
        position=Position(lat=48.1, lon=11.6),
    )


def through_the_api(state: MowerState) -> MowerState:
    """A simulated state as events, merged and mapped back as the gateway does."""
    a = MowerAttributes()
    for name, part in attributes_of(state).items():
        event = decode_event(
            f'{{"id":"x","type":"t","attributes":{{"{name}":{json.dumps(part)}}}}}'.encode()
        )
        assert event is not None
        a = event.merged(a)
    return mapping.state(a, mower_id=state.mower_id, account_id=state.account_id, now=NOW)


@pytest.mark.parametrize(
    "activity",
    ["idle", "leaving", "mowing", "paused", "returning", "docked", "charging", "stopped"],
)
def test_an_activity_survives_the_trip_through_the_api(activity: Activity) -> None:
    back = through_the_api(sim_state(activity))
    assert back.activity == activity
    assert back.battery == 80
    assert back.blade_height_mm == 45
    assert back.position is not None
    assert (back.position.lat, back.position.lon) == (48.1, 11.6)


@pytest.mark.parametrize(
    ("code", "number"),
    [("stuck", 9), ("lifted", 71), ("battery_empty", 12), ("outside_area", 1), ("rain", 0)],
)
def test_an_error_is_the_vendor_s_number(code: str, number: int) -> None:
    back = through_the_api(sim_state("error", code))
    assert back.activity == "error"
    assert back.error_code == (f"automower.{number}" if number else None)


@pytest.mark.parametrize(
    "at",
    [datetime(2026, 1, 15, 18, tzinfo=UTC), datetime(2026, 7, 15, 18, tzinfo=UTC)],
    ids=["winter", "summer"],
)
def test_a_time_as_the_mower_s_wall_clock_reads_back_as_the_instant(at: datetime) -> None:
    ms = wall_ms(at, "Europe/Berlin")
    offset = 1 if at.month == 1 else 2
    assert ms % 86_400_000 == (18 + offset) * 3_600_000
    assert local_instant(ms, ZoneInfo("Europe/Berlin")) == at
