"""What the store keeps and answers: the fingerprint memory, rows and history bins."""

from __future__ import annotations

import uuid
from datetime import datetime

import msgspec

from contracts.v1 import MowerState, Position

__all__ = [
    "HistoryBin",
    "HistoryRow",
    "Memory",
    "PositionRow",
    "TimelineRow",
    "TrackPoint",
    "history_row",
    "position_row",
]


class TrackPoint(msgspec.Struct, frozen=True):
    """The last position appended to a mower's track, with its RTK fix."""

    lat: float
    lon: float
    rtk_fix: str


class Memory(msgspec.Struct, frozen=True, kw_only=True):
    """What the latest row remembers besides the state: the fingerprint actor's snapshot."""

    account_id: uuid.UUID
    observed_at: datetime
    history_at: datetime | None
    state_fp: int
    track: TrackPoint | None


class HistoryRow(msgspec.Struct, frozen=True, kw_only=True):
    """One stored change (or heartbeat) of a mower's significant fields."""

    observed_at: datetime
    activity: str
    battery: int
    charging: bool
    rtk_fix: str
    rtk_source: str | None
    connection: str | None
    blade_height_mm: int | None
    speed_mps: float | None
    error_code: str | None


class PositionRow(msgspec.Struct, frozen=True, kw_only=True):
    """One point of a mower's track."""

    observed_at: datetime
    lat: float
    lon: float
    heading_deg: float | None
    rtk_fix: str


class TimelineRow(msgspec.Struct, frozen=True, kw_only=True):
    """One status transition of a command."""

    command_id: uuid.UUID
    status: str
    mower_id: uuid.UUID
    account_id: uuid.UUID
    at: datetime
    reason: str | None = None
    kind: str | None = None


class HistoryBin(msgspec.Struct, frozen=True, kw_only=True):
    """One downsampled history point: the bin start and its aggregates."""

    bin: datetime
    activity: str
    rtk_fix: str
    error_code: str | None
    battery: int
    battery_min: int
    battery_max: int
    charging: bool
    samples: int
    position: Position | None


def history_row(state: MowerState) -> HistoryRow:
    """The history row of a state."""
    return HistoryRow(
        observed_at=state.observed_at,
        activity=state.activity,
        battery=state.battery,
        charging=state.charging,
        rtk_fix=state.rtk_fix,
        rtk_source=state.rtk_source,
        connection=state.connection,
        blade_height_mm=state.blade_height_mm,
        speed_mps=state.speed_mps,
        error_code=state.error_code,
    )


def position_row(state: MowerState) -> PositionRow:
    """The track point of a state that has a position."""
    if state.position is None:
        raise ValueError("the state has no position")
    return PositionRow(
        observed_at=state.observed_at,
        lat=state.position.lat,
        lon=state.position.lon,
        heading_deg=state.position.heading_deg,
        rtk_fix=state.rtk_fix,
    )
