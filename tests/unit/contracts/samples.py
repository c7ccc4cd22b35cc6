"""One fixed instance of every v1 model: the golden files are their encodings."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from contracts.v1 import (
    CommandEnvelope,
    CommandResult,
    Connection,
    EmergencyStop,
    EventEnvelope,
    GrantsChanged,
    ManualDrive,
    MowerLink,
    MowerListReply,
    MowerListRequest,
    MowerRegistration,
    MowerState,
    NotificationSent,
    PauseMow,
    Position,
    ResumeMow,
    ReturnToDock,
    SetBladeHeight,
    SetSpeed,
    StartMow,
    Struct,
    UserRef,
)

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
MOWER = uuid.UUID("6f1c2a9e-0d3b-4c55-9a7e-2b8f3c4d5e6f")
ACCOUNT = uuid.UUID("a0c1e2f3-4455-4677-8899-aabbccddeeff")
CMD = uuid.UUID("c0ffee00-1234-4abc-8def-0123456789ab")
EVT = uuid.UUID("e7e7e7e7-0000-4000-8000-000000000001")
REG = MowerRegistration(
    mower_id=MOWER,
    account_id=ACCOUNT,
    name="Back garden",
    connection=Connection(kind="simulator", options={"url": "ws://127.0.0.1:8765/mowers/x/ws"}),
)


def _cmd(command: Any, **kw: Any) -> CommandEnvelope:
    return CommandEnvelope(
        command_id=CMD,
        mower_id=MOWER,
        account_id=ACCOUNT,
        issued_by="user:alice",
        issued_at=T0,
        expires_at=datetime(2026, 5, 1, 12, 0, 30, tzinfo=UTC),
        command=command,
        correlation_id=EVT,
        **kw,
    )


def _event(event_type: str, payload: Any) -> EventEnvelope[Any]:
    return EventEnvelope(
        id=EVT,
        type=event_type,
        version=1,
        occurred_at=T0,
        producer="fleet",
        payload=payload,
        account_id=ACCOUNT,
        correlation_id=CMD,
        causation_id=None,
    )


SAMPLES: dict[str, Struct] = {
    "command.start_mow": _cmd(StartMow(duration_min=45)),
    "command.pause_mow": _cmd(PauseMow()),
    "command.resume_mow": _cmd(ResumeMow()),
    "command.return_to_dock": _cmd(ReturnToDock()),
    "command.emergency_stop": _cmd(EmergencyStop(reason="person on lawn")),
    "command.set_blade_height": _cmd(SetBladeHeight(height_mm=45)),
    "command.set_speed": _cmd(SetSpeed(speed_mps=0.6)),
    "command.manual_drive": _cmd(ManualDrive(linear_mps=0.4, angular_rps=-0.5, ttl_ms=500)),
    "result.executed": CommandResult(
        command_id=CMD, mower_id=MOWER, status="executed", at=T0, kind="start_mow"
    ),
    "result.rejected": CommandResult(
        command_id=CMD,
        mower_id=MOWER,
        status="rejected",
        at=T0,
        reason="preempted by emergency_stop",
        kind="start_mow",
    ),
    "state.mowing": MowerState(
        mower_id=MOWER,
        account_id=ACCOUNT,
        observed_at=T0,
        activity="mowing",
        battery=73,
        charging=False,
        rtk_fix="fixed",
        rtk_source="ntrip:base-1",
        connection="wifi",
        blade_height_mm=40,
        speed_mps=0.5,
        error_code=None,
        position=Position(lat=52.52, lon=13.405, heading_deg=90.0),
        raw={"fw": "1.2.3"},
    ),
    "state.minimal": MowerState(
        mower_id=MOWER, account_id=ACCOUNT, observed_at=T0, activity="offline", battery=0
    ),
    "registration": REG,
    "list_request": MowerListRequest(shard_index=1, shard_count=2),
    "list_reply": MowerListReply(mowers=[REG]),
    "link": MowerLink(mower_id=MOWER, reason="heartbeat timeout"),
    "event.mower.registered": _event("mower.registered", REG),
    "event.mower.disconnected": _event("mower.disconnected", MowerLink(mower_id=MOWER)),
    "event.identity.user.deleted": _event("identity.user.deleted", UserRef(user_id="alice")),
    "event.identity.user.disabled": _event("identity.user.disabled", UserRef(user_id="bob")),
    "event.identity.grants.changed": _event(
        "identity.grants.changed", GrantsChanged(account_id=ACCOUNT, user_id="alice")
    ),
    "event.notifications.sent": _event(
        "notifications.sent",
        NotificationSent(
            notification_id=EVT,
            user_id="alice",
            mower_id=MOWER,
            kind="battery_low",
            severity="warning",
            dedupe_key=f"battery_low:{MOWER}:2026-05-01T12:00:00Z",
            title="Battery low",
            body="Back garden is at 18 %",
        ),
    ),
}
