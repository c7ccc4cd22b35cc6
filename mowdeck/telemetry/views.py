"""What Telemetry's query API answers: the response models the handlers encode and the
OpenAPI document describes (``telemetry/openapi.py``)."""

from __future__ import annotations

from datetime import datetime, timedelta

import msgspec

from contracts.v1 import MowerState
from mowdeck.telemetry.model import HistoryBin, HistoryRow, PositionRow, TimelineRow

__all__ = [
    "BinsPage",
    "HistoryPage",
    "StatePage",
    "StateView",
    "TimelinePage",
    "TrackPage",
    "state_view",
]


class StateView(MowerState, frozen=True, kw_only=True):
    """A mower's latest state; ``stale`` when older than the service's staleness limit."""

    stale: bool


def state_view(state: MowerState, now: datetime, stale_after: timedelta) -> StateView:
    """The view of ``state`` as of ``now``."""
    fields = {name: getattr(state, name) for name in state.__struct_fields__}
    return StateView(**fields, stale=now - state.observed_at > stale_after)


class StatePage(msgspec.Struct, frozen=True, kw_only=True):
    """A page of latest states by mower id; ``next_after`` continues it while ``has_more``."""

    items: list[StateView]
    next_after: str | None
    has_more: bool


class HistoryPage(msgspec.Struct, frozen=True, kw_only=True):
    """A mower's stored changes in the window, oldest first; ``truncated`` when cut short
    at the row limit (ask for a shorter window)."""

    step: None
    items: list[HistoryRow]
    truncated: bool


class BinsPage(msgspec.Struct, frozen=True, kw_only=True):
    """A mower's history downsampled to bins of ``step``, oldest first."""

    step: str
    items: list[HistoryBin]
    truncated: bool


class TrackPage(msgspec.Struct, frozen=True, kw_only=True):
    """A mower's positions in the window, oldest first; ``truncated`` at the row limit."""

    items: list[PositionRow]
    truncated: bool


class TimelinePage(msgspec.Struct, frozen=True, kw_only=True):
    """The status transitions of a mower's commands in the window, oldest first."""

    items: list[TimelineRow]
    truncated: bool
