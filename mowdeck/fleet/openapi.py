"""The operations of Fleet's API (``fleet/routes.py``), for its OpenAPI document."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import msgspec

from contracts.v1 import (
    COMMAND_KINDS,
    AwareDatetime,
    CommandResult,
    Connection,
    MowerRegistration,
    PauseMow,
)
from mowdeck.fleet.audit import MAX_LIMIT as AUDIT_MAX
from mowdeck.fleet.ports import AuditEntry, AuditStatus
from mowdeck.fleet.rules import CommandRequest, PatchRequest, RegisterRequest
from mowdeck.fleet.schedules.openapi import OPERATIONS as SCHEDULE_OPERATIONS
from mowdeck.fleet.sites.openapi import SITE_OPERATIONS
from mowdeck.fleet.views import (
    AuditPage,
    CommandAccepted,
    CommandView,
    MowerPage,
    MowerView,
    StatusView,
)
from mowdeck.kit.openapi import Body, Link, Operation, Param, document
from mowdeck.kit.paging import Cursor

__all__ = ["OPERATIONS", "openapi"]

_AT = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
_MOWER = uuid.UUID("6f1c2a9e-0d3b-4c55-9a7e-2b8f3c4d5e6f")
_ACCOUNT = uuid.UUID("a0c1e2f3-4455-4677-8899-aabbccddeeff")
_COMMAND = uuid.UUID("c0ffee00-1234-4abc-8def-0123456789ab")
_CONNECTION = Connection(kind="simulator", options={"url": "ws://127.0.0.1:8765/mowers/x/ws"})
_VIEW = MowerView(
    mower_id=_MOWER,
    account_id=_ACCOUNT,
    name="Back garden",
    connection=_CONNECTION,
    created_at=_AT,
    updated_at=_AT,
)
_REG = MowerRegistration(
    mower_id=_MOWER, account_id=_ACCOUNT, name="Back garden", connection=_CONNECTION
)
_ENTRY = AuditEntry(
    command_id=_COMMAND,
    account_id=_ACCOUNT,
    mower_id=_MOWER,
    kind="pause_mow",
    command=msgspec.Raw(b'{"kind":"pause_mow"}'),
    issued_by="user:alice",
    issued_at=_AT,
    expires_at=_AT,
    statuses=[AuditStatus(status="executed", at=_AT, reason=None, source="gateway")],
)
_CURSOR = "WyJCYWNrIGdhcmRlbiIsIjZmMWMyYTllIl0"

Limit = Annotated[int, msgspec.Meta(ge=1, le=1000)]
AuditLimit = Annotated[int, msgspec.Meta(ge=1, le=AUDIT_MAX)]
# As ``rules.parse_wait`` reads it: digits with an optional point, no exponent or sign.
Wait = Annotated[str, msgspec.Meta(pattern=r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)$")]
Kind = Literal[COMMAND_KINDS]  # type: ignore[valid-type]

_ID = Param("mower_id", "path", uuid.UUID, "The mower's id.")
_AFTER = Param("after", "query", Cursor, "The cursor of the previous page (`next_after`).")
_TIME = "An RFC 3339 time with an offset."
_AUDIT_QUERY = (
    Param("mower", "query", uuid.UUID, "Only the commands of this mower."),
    Param("from", "query", AwareDatetime, f"Only commands issued at or after this. {_TIME}"),
    Param("to", "query", AwareDatetime, f"Only commands issued before this. {_TIME}"),
    Param("kind", "query", Kind, "Only commands of this kind."),
)
_MOWER_PROBLEMS = (404, 503)
_MOWER_LINK = {"mower_id": "$response.body#/mower_id"}

OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "POST",
        "/v1/mowers",
        "registerMower",
        "Register a mower (idempotent with the same `mower_id` and body).",
        {
            201: Body(MowerRegistration, _REG, "Registered."),
            200: Body(MowerRegistration, _REG, "Registered before, with this body."),
        },
        links=tuple(
            Link(201, name, op, _MOWER_LINK)
            for name, op in (
                ("get", "getMower"),
                ("update", "updateMower"),
                ("command", "sendCommand"),
                ("remove", "removeMower"),
            )
        ),
        body=Body(RegisterRequest, RegisterRequest(name="Back garden", connection=_CONNECTION)),
        problems=(403, 409, 422, 503),
        tags=("mowers",),
    ),
    Operation(
        "GET",
        "/v1/mowers",
        "listMowers",
        "A page of the mowers the caller may see, by name then id.",
        {200: Body(MowerPage, MowerPage(mowers=[_VIEW], next_after=_CURSOR, has_more=True))},
        params=(Param("limit", "query", Limit, "Mowers per page (100 when absent)."), _AFTER),
        problems=(400, 503),
        tags=("mowers",),
    ),
    Operation(
        "GET",
        "/v1/mowers/{mower_id}",
        "getMower",
        "One mower.",
        {200: Body(MowerView, _VIEW)},
        params=(_ID,),
        problems=_MOWER_PROBLEMS,
        tags=("mowers",),
    ),
    Operation(
        "PATCH",
        "/v1/mowers/{mower_id}",
        "updateMower",
        "Rename a mower, change its connection or its site (`site_id` null: no site).",
        {200: Body(MowerView, _VIEW)},
        params=(_ID,),
        body=Body(
            PatchRequest,
            PatchRequest(name="Front lawn"),
            "At least one of `name`, `connection` (neither null) and `site_id`.",
            also={
                "anyOf": [
                    {"required": ["name"], "properties": {"name": {"type": "string"}}},
                    {"required": ["connection"], "properties": {"connection": {"type": "object"}}},
                    {"required": ["site_id"]},
                ]
            },
        ),
        problems=(403, 404, 409, 422, 503),
        tags=("mowers",),
    ),
    Operation(
        "DELETE",
        "/v1/mowers/{mower_id}",
        "removeMower",
        "Remove a mower.",
        {204: "Removed."},
        params=(_ID,),
        problems=(403, 404, 409, 503),
        tags=("mowers",),
    ),
    Operation(
        "POST",
        "/v1/mowers/{mower_id}/commands",
        "sendCommand",
        "Send a command; with `wait`, answer its final result when it comes in time.",
        {
            200: Body(
                CommandResult,
                CommandResult(command_id=_COMMAND, mower_id=_MOWER, status="executed", at=_AT),
                "The final result, within `wait`.",
            ),
            202: Body(CommandAccepted, CommandAccepted(command_id=_COMMAND), "Sent."),
        },
        links=(
            Link(
                202,
                "status",
                "getCommand",
                {"mower_id": "$request.path.mower_id", "command_id": "$response.body#/command_id"},
            ),
        ),
        params=(
            _ID,
            Param(
                "wait",
                "query",
                Wait,
                "Seconds to wait for the final result (0: none), such as 2.5; at most the "
                "service's `MOWDECK_COMMAND_MAX_WAIT_SECONDS` (a 422 above it).",
            ),
        ),
        body=Body(CommandRequest, CommandRequest(command=PauseMow())),
        problems=(403, 404, 422, 429, 503),
        tags=("commands",),
    ),
    Operation(
        "GET",
        "/v1/mowers/{mower_id}/commands/{command_id}",
        "getCommand",
        "A command and the statuses it reached so far.",
        {
            200: Body(
                CommandView,
                CommandView(
                    command_id=_COMMAND,
                    mower_id=_MOWER,
                    kind="pause_mow",
                    issued_by="user:alice",
                    issued_at=_AT,
                    expires_at=_AT,
                    statuses=[StatusView(status="executed", at=_AT, reason=None)],
                    final=True,
                ),
            )
        },
        params=(_ID, Param("command_id", "path", uuid.UUID, "The command's id.")),
        problems=_MOWER_PROBLEMS,
        tags=("commands",),
    ),
    Operation(
        "GET",
        "/v1/audit",
        "getAudit",
        "A page of the account's commands (a site member: its mowers'), newest first.",
        {
            200: Body(
                AuditPage,
                AuditPage(
                    commands=[_ENTRY], next_after=_CURSOR, next_cursor=_CURSOR, has_more=True
                ),
            )
        },
        params=(
            *_AUDIT_QUERY,
            Param("limit", "query", AuditLimit, "Commands per page (100 when absent)."),
            _AFTER,
            Param("cursor", "query", str, "The former name of `after`.", required=False),
        ),
        problems=(400, 403, 422, 503),
        tags=("audit",),
    ),
    Operation(
        "GET",
        "/v1/audit/export",
        "exportAudit",
        "Every matching command as JSON lines, newest first.",
        {200: Body(AuditEntry, _ENTRY, "One command a line.", media_type="application/x-ndjson")},
        params=_AUDIT_QUERY,
        problems=(400, 403, 422, 503),
        tags=("audit",),
    ),
    *SITE_OPERATIONS,
)


def openapi(version: str = "1") -> dict[str, Any]:
    """Fleet's OpenAPI document."""
    return document(
        "Mowdeck Fleet",
        version,
        (*OPERATIONS, *SCHEDULE_OPERATIONS),
        "The mower registry, commands to mowers and the audit of them.",
    )
