"""The operations of Telemetry's query API (``telemetry/routes.py``), for its OpenAPI
document."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Any

import msgspec

from contracts.v1 import AwareDatetime, Position
from mowdeck.kit.openapi import Body, OneOf, Operation, Param, document
from mowdeck.kit.paging import Cursor
from mowdeck.telemetry.model import HistoryBin, HistoryRow, PositionRow, TimelineRow
from mowdeck.telemetry.views import (
    BinsPage,
    HistoryPage,
    StatePage,
    StateView,
    TimelinePage,
    TrackPage,
)

__all__ = ["OPERATIONS", "openapi"]

_AT = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
_MOWER = uuid.UUID("6f1c2a9e-0d3b-4c55-9a7e-2b8f3c4d5e6f")
_ACCOUNT = uuid.UUID("a0c1e2f3-4455-4677-8899-aabbccddeeff")
_STATE = StateView(
    mower_id=_MOWER,
    account_id=_ACCOUNT,
    observed_at=_AT,
    activity="mowing",
    battery=81,
    position=Position(lat=52.52, lon=13.405, heading_deg=90.0),
    stale=False,
)
_ROW = HistoryRow(
    observed_at=_AT,
    activity="mowing",
    battery=81,
    charging=False,
    rtk_fix="fixed",
    rtk_source=None,
    connection="wifi",
    blade_height_mm=40,
    speed_mps=0.5,
    error_code=None,
)
_BIN = HistoryBin(
    bin=_AT,
    activity="mowing",
    rtk_fix="fixed",
    error_code=None,
    battery=80,
    battery_min=79,
    battery_max=81,
    charging=False,
    samples=12,
    position=None,
)
_TIME = "An RFC 3339 time with an offset"
_WINDOW = (
    Param("mower_id", "path", uuid.UUID, "The mower's id."),
    Param("from", "query", AwareDatetime, f"{_TIME}; 24 hours before `to` when absent."),
    Param("to", "query", AwareDatetime, f"{_TIME}; now when absent."),
)
Limit = Annotated[int, msgspec.Meta(ge=1, le=1000)]
Step = Annotated[str, msgspec.Meta(pattern=r"^[0-9]+[smhd]$")]
_WINDOW_PROBLEMS = (400, 404, 422, 503)
_TAGS = ("telemetry",)

OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "GET",
        "/v1/mowers/{mower_id}/state",
        "getState",
        "A mower's latest state (404 `no-telemetry-yet` before its first).",
        {200: Body(StateView, _STATE)},
        params=_WINDOW[:1],
        problems=(404, 503),
        tags=_TAGS,
    ),
    Operation(
        "GET",
        "/v1/mowers/{mower_id}/history",
        "getHistory",
        "A mower's history in a window: its stored changes, or bins of `step`.",
        {
            200: Body(
                OneOf((HistoryPage, BinsPage)),
                BinsPage(step="1m", items=[_BIN], truncated=False),
                "Changes without `step`, bins with it.",
            )
        },
        params=(*_WINDOW, Param("step", "query", Step, "A bin size: `5s`, `1m`, `1h`, `1d`.")),
        problems=_WINDOW_PROBLEMS,
        tags=_TAGS,
    ),
    Operation(
        "GET",
        "/v1/mowers/{mower_id}/track",
        "getTrack",
        "A mower's positions in a window.",
        {
            200: Body(
                TrackPage,
                TrackPage(
                    items=[
                        PositionRow(
                            observed_at=_AT,
                            lat=52.52,
                            lon=13.405,
                            heading_deg=None,
                            rtk_fix="fixed",
                        )
                    ],
                    truncated=False,
                ),
            )
        },
        params=_WINDOW,
        problems=_WINDOW_PROBLEMS,
        tags=_TAGS,
    ),
    Operation(
        "GET",
        "/v1/mowers/{mower_id}/commands",
        "getCommandTimeline",
        "The status transitions of a mower's commands in a window.",
        {
            200: Body(
                TimelinePage,
                TimelinePage(
                    items=[
                        TimelineRow(
                            command_id=uuid.UUID(int=1),
                            status="executed",
                            mower_id=_MOWER,
                            account_id=_ACCOUNT,
                            at=_AT,
                            kind="pause_mow",
                        )
                    ],
                    truncated=False,
                ),
            )
        },
        params=_WINDOW,
        problems=_WINDOW_PROBLEMS,
        tags=_TAGS,
    ),
    Operation(
        "GET",
        "/v1/states",
        "listStates",
        "A page of the latest states of the mowers the caller may see, by mower id.",
        {
            200: Body(
                StatePage, StatePage(items=[_STATE], next_after="IjZmMWMyYTllIg", has_more=True)
            )
        },
        params=(
            Param("limit", "query", Limit, "States per page (500 when absent)."),
            Param("after", "query", Cursor, "The cursor of the previous page (`next_after`)."),
        ),
        problems=(400, 422, 503),
        tags=_TAGS,
    ),
)


def openapi(version: str = "1") -> dict[str, Any]:
    """Telemetry's OpenAPI document."""
    return document(
        "Mowdeck Telemetry",
        version,
        OPERATIONS,
        "Mowers' latest states, their history, tracks and command timelines.",
    )
