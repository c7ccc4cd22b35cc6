"""States and times shared by the telemetry tests."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from contracts.v1 import MowerState, Position

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
ACCOUNT = uuid.UUID("00000000-0000-4000-8000-00000000000a")
OTHER_ACCOUNT = uuid.UUID("00000000-0000-4000-8000-00000000000b")
MOWER = uuid.UUID("00000000-0000-4000-8000-000000000001")


def at(seconds: float) -> datetime:
    """``T0`` plus ``seconds``."""
    return T0 + timedelta(seconds=seconds)


def state(
    seconds: float = 0,
    *,
    mower_id: uuid.UUID = MOWER,
    account_id: uuid.UUID = ACCOUNT,
    lat: float | None = 52.5,
    lon: float = 13.4,
    **fields: Any,
) -> MowerState:
    """An idle, docked-like state at ``T0 + seconds`` with overrides."""
    values: dict[str, Any] = {
        "activity": "idle",
        "battery": 80,
        "charging": False,
        "rtk_fix": "fixed",
        "connection": "wifi",
    }
    values.update(fields)
    return MowerState(
        mower_id=mower_id,
        account_id=account_id,
        observed_at=at(seconds),
        position=None if lat is None else Position(lat=lat, lon=lon),
        **values,
    )
