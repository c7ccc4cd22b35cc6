"""The operations of Notifications' API (``inbox/routes.py`` and ``delivery/routes.py``),
for its OpenAPI document."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import msgspec

from contracts.v1 import AwareDatetime
from mowdeck.kit.openapi import Body, Link, OneOf, Operation, Param, document
from mowdeck.kit.paging import Cursor
from mowdeck.notifications.alarms.audit import MAX_LIMIT as AUDIT_MAX_LIMIT
from mowdeck.notifications.alarms.audit import AuditChange, AuditPageView, AuditView
from mowdeck.notifications.alarms.model import AlarmPageView, AlarmView
from mowdeck.notifications.alarms.routes import MAX_LIMIT as ALARM_MAX_LIMIT
from mowdeck.notifications.alarms.routes import Acknowledgement, Assignment
from mowdeck.notifications.delivery.routes import TargetPage, TargetView, VapidKey
from mowdeck.notifications.delivery.targets import (
    LogTarget,
    NtfyTarget,
    WebPushTarget,
)
from mowdeck.notifications.inbox.preferences import Preferences
from mowdeck.notifications.inbox.routes import (
    INBOX_MAX_LIMIT,
    InboxItemView,
    InboxView,
)

__all__ = ["OPERATIONS", "openapi"]

_AT = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
_MOWER = uuid.UUID("6f1c2a9e-0d3b-4c55-9a7e-2b8f3c4d5e6f")
_ITEM = InboxItemView(
    id=uuid.UUID("e7e7e7e7-0000-4000-8000-000000000001"),
    kind="battery_low",
    mower_id=_MOWER,
    severity="warning",
    title="Back garden: battery low",
    body="Battery at 18%.",
    occurred_at=_AT,
    read=False,
)
_PREFS = Preferences(scope="all", kinds={"battery_low": True})
_NTFY = TargetView(
    id=uuid.UUID("7a7a7a7a-0000-4000-8000-000000000002"),
    channel="ntfy",
    created_at=_AT,
    server="https://ntfy.sh",
    topic="lawn",
    token_set=False,
)
InboxLimit = Annotated[int, msgspec.Meta(ge=1, le=INBOX_MAX_LIMIT)]
TargetLimit = Annotated[int, msgspec.Meta(ge=1, le=1000)]
_AFTER = Param("after", "query", Cursor, "The cursor of the previous page (`next_after`).")
_ALARM = AlarmView(
    id=uuid.UUID("a1a1a1a1-0000-4000-8000-000000000003"),
    mower_id=_MOWER,
    condition="error:E42",
    kind="mower_stuck",
    severity="critical",
    state="acknowledged",
    first_at=_AT,
    latest_at=_AT,
    count=1,
    code="E42",
    params={"error_code": "E42"},
    acknowledged_by="erin",
    acknowledged_at=_AT,
    comment="on my way",
    assignee=None,
    assigned_by=None,
    assigned_at=None,
    cleared_at=None,
)
AlarmLimit = Annotated[int, msgspec.Meta(ge=1, le=ALARM_MAX_LIMIT)]
AuditLimit = Annotated[int, msgspec.Meta(ge=1, le=AUDIT_MAX_LIMIT)]
_AUDIT_LINE = AuditView(
    seq=42,
    at=_AT,
    mower_id=_MOWER,
    alarm_id=_ALARM.id,
    change="acknowledged",
    kind="mower_stuck",
    condition="error:E42",
    severity="critical",
    code="E42",
    by="erin",
    comment="on my way",
    assignee=None,
)
_AUDIT_QUERY = (
    Param("mower", "query", uuid.UUID, "Only this mower's changes."),
    Param("change", "query", AuditChange, "Only changes of this kind."),
    Param("from", "query", AwareDatetime, "From this time on (RFC 3339 with its offset)."),
    Param("to", "query", AwareDatetime, "Before this time (RFC 3339 with its offset)."),
)
_ALARM_ID = Param("alarm_id", "path", uuid.UUID, "The alarm's id.")
_ALARMS = ("alarms",)
_INBOX = ("inbox",)
_TARGETS = ("targets",)
# Every route answers 403 to a user who may view no mower (ADR 0022).
_COMMON = (403, 503)

OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "GET",
        "/v1/notifications/preferences",
        "getPreferences",
        "The caller's preferences, every kind listed.",
        {200: Body(Preferences, _PREFS)},
        problems=_COMMON,
        tags=_INBOX,
    ),
    Operation(
        "PUT",
        "/v1/notifications/preferences",
        "putPreferences",
        "Replace the caller's preferences.",
        {200: Body(Preferences, _PREFS)},
        body=Body(Preferences, _PREFS),
        problems=(*_COMMON, 404, 422),
        tags=_INBOX,
    ),
    Operation(
        "GET",
        "/v1/notifications/inbox",
        "getInbox",
        "A page of the caller's inbox, newest first, rendered in their locale.",
        {
            200: Body(
                InboxView,
                InboxView(items=[_ITEM], next=None, next_after=None, has_more=False, unread=1),
            )
        },
        params=(
            Param("limit", "query", InboxLimit, "Items per page (50 when absent)."),
            _AFTER,
            Param("before", "query", str, "The former name of `after`."),
        ),
        problems=(*_COMMON, 400),
        tags=_INBOX,
    ),
    Operation(
        "POST",
        "/v1/notifications/inbox/{item_id}/read",
        "markRead",
        "Mark one of the caller's inbox items read.",
        {204: "Marked read."},
        params=(Param("item_id", "path", uuid.UUID, "The inbox item's id."),),
        problems=(*_COMMON, 404),
        tags=_INBOX,
    ),
    Operation(
        "POST",
        "/v1/notifications/targets",
        "addTarget",
        "Register where the caller's notifications go: a browser (webpush) or an ntfy topic.",
        {201: Body(TargetView, _NTFY, "Registered.")},
        links=(Link(201, "delete", "deleteTarget", {"target_id": "$response.body#/id"}),),
        body=Body(
            OneOf((WebPushTarget, NtfyTarget, LogTarget)),
            NtfyTarget(server="https://ntfy.sh", topic="lawn"),
            "A target; `log` only where the service enables that channel.",
        ),
        problems=(*_COMMON, 422, 429),
        tags=_TARGETS,
    ),
    Operation(
        "GET",
        "/v1/notifications/targets",
        "listTargets",
        "A page of the caller's targets, oldest first.",
        {200: Body(TargetPage, TargetPage(items=[_NTFY], next_after=None, has_more=False))},
        params=(
            Param("limit", "query", TargetLimit, "Targets per page (100 when absent)."),
            _AFTER,
        ),
        problems=(*_COMMON, 400),
        tags=_TARGETS,
    ),
    Operation(
        "DELETE",
        "/v1/notifications/targets/{target_id}",
        "deleteTarget",
        "Delete one of the caller's targets.",
        {204: "Deleted."},
        params=(Param("target_id", "path", uuid.UUID, "The target's id."),),
        problems=(*_COMMON, 404),
        tags=_TARGETS,
    ),
    Operation(
        "GET",
        "/v1/alarms",
        "listAlarms",
        "A page of the alarms of the mowers the caller may view, newest first (open ones"
        " unless `state` asks for another).",
        {200: Body(AlarmPageView, AlarmPageView(items=[_ALARM], next_after=None, has_more=False))},
        params=(
            Param("state", "query", Literal["active", "acknowledged", "cleared"], "Only these."),
            Param("mower", "query", uuid.UUID, "Only this mower's (none if not visible)."),
            Param("severity", "query", Literal["info", "warning", "critical"], "Only these."),
            Param("limit", "query", AlarmLimit, "Alarms per page (50 when absent)."),
            _AFTER,
        ),
        problems=(*_COMMON, 400),
        tags=_ALARMS,
    ),
    Operation(
        "POST",
        "/v1/alarms/{alarm_id}/acknowledge",
        "acknowledgeAlarm",
        "Acknowledge an alarm (the operator role on its mower); the first acknowledgement"
        " stays, a later one may replace the comment.",
        {200: Body(AlarmView, _ALARM, "The alarm after.")},
        params=(_ALARM_ID,),
        body=Body(Acknowledgement, Acknowledgement(comment="on my way"), "Optional."),
        problems=(*_COMMON, 400, 404, 415, 422),
        tags=_ALARMS,
    ),
    Operation(
        "POST",
        "/v1/alarms/{alarm_id}/assign",
        "assignAlarm",
        "Assign an alarm to a user who may view its mower, or to nobody (null).",
        {200: Body(AlarmView, _ALARM, "The alarm after.")},
        params=(_ALARM_ID,),
        body=Body(Assignment, Assignment(assignee="frank")),
        problems=(*_COMMON, 400, 404, 415, 422),
        tags=_ALARMS,
    ),
    Operation(
        "GET",
        "/v1/alarms/audit",
        "listAlarmAudit",
        "A page of the account's alarm audit trail, newest first: every change of every"
        " alarm, who acknowledged or assigned it (account admins only).",
        {
            200: Body(
                AuditPageView, AuditPageView(items=[_AUDIT_LINE], next_after=None, has_more=False)
            )
        },
        params=(
            *_AUDIT_QUERY,
            Param("limit", "query", AuditLimit, "Lines per page (100 when absent)."),
            _AFTER,
        ),
        problems=(400, 403, 422, 503),
        tags=_ALARMS,
    ),
    Operation(
        "GET",
        "/v1/alarms/audit/export",
        "exportAlarmAudit",
        "Every matching line of the alarm audit trail as JSON lines, newest first.",
        {
            200: Body(
                AuditView, _AUDIT_LINE, "One change a line.", media_type="application/x-ndjson"
            )
        },
        params=_AUDIT_QUERY,
        problems=(400, 403, 422, 503),
        tags=_ALARMS,
    ),
    Operation(
        "GET",
        "/v1/notifications/webpush/vapid-public-key",
        "getVapidPublicKey",
        "The key a browser subscribes with (404 while Web Push is not enabled).",
        {
            200: Body(
                VapidKey, VapidKey("BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u")
            )
        },
        problems=(*_COMMON, 404),
        tags=_TARGETS,
    ),
)


def openapi(version: str = "1") -> dict[str, Any]:
    """Notifications' OpenAPI document."""
    return document(
        "Mowdeck Notifications",
        version,
        OPERATIONS,
        "Preferences, the inbox, the targets notifications are delivered to, and alarms.",
    )
