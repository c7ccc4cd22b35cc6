"""The state a mower reports, as published on ``telemetry.mower.<id>``."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import msgspec

from contracts.v1._base import AwareDatetime, Struct, utc_field

__all__ = ["ACTIVITIES", "Activity", "MowerState", "Position", "RtkFix"]

Activity = Literal[
    "idle",
    "leaving",
    "mowing",
    "paused",
    "returning",
    "docked",
    "charging",
    "manual",
    "stopped",
    "error",
    "offline",
]
ACTIVITIES: tuple[str, ...] = Activity.__args__  # type: ignore[attr-defined]
RtkFix = Literal["none", "single", "float", "fixed"]


class Position(Struct, frozen=True):
    """A WGS84 position with an optional heading."""

    lat: Annotated[float, msgspec.Meta(ge=-90.0, le=90.0)]
    lon: Annotated[float, msgspec.Meta(ge=-180.0, le=180.0)]
    heading_deg: Annotated[float, msgspec.Meta(ge=0.0, lt=360.0)] | None = None


class MowerState(Struct, frozen=True):
    """One observation of a mower."""

    mower_id: uuid.UUID
    account_id: uuid.UUID
    observed_at: AwareDatetime
    activity: Activity
    battery: Annotated[int, msgspec.Meta(ge=0, le=100)]
    charging: bool = False
    rtk_fix: RtkFix = "none"
    rtk_source: Annotated[str, msgspec.Meta(max_length=100)] | None = None
    connection: Annotated[str, msgspec.Meta(max_length=50)] | None = None
    blade_height_mm: Annotated[int, msgspec.Meta(ge=0, le=200)] | None = None
    speed_mps: Annotated[float, msgspec.Meta(ge=0.0, le=5.0)] | None = None
    error_code: Annotated[str, msgspec.Meta(max_length=100)] | None = None
    position: Position | None = None
    raw: dict[str, Any] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        # Runs for every state decoded: skip the general check for what nearly every one
        # is, a timestamp in UTC already (a ``Z`` decodes to ``UTC`` itself).
        at = self.observed_at
        if type(at) is not datetime or at.tzinfo is not UTC:
            utc_field(self, "observed_at")

    def significant(self) -> tuple[object, ...]:
        """Everything but ``observed_at`` and ``raw``: what makes a state a change."""
        return (
            self.activity,
            self.battery,
            self.charging,
            self.rtk_fix,
            self.rtk_source,
            self.connection,
            self.blade_height_mm,
            self.speed_mps,
            self.error_code,
            self.position,
        )
