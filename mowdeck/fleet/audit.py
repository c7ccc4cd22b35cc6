"""Pure rules of the audit API: its query parameters and its opaque page cursor."""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime

import msgspec

from contracts.v1 import COMMAND_KINDS
from mowdeck.fleet.errors import BadQueryError
from mowdeck.fleet.ports import AuditEntry, AuditQuery
from mowdeck.kit.times import TimeRefusal, check_time, query_range

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "audit_query", "cursor_of"]

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


def _limit(raw: str | None) -> int:
    # An empty ``limit`` is a bad one, as on every list (``kit.paging``).
    if raw is None:
        return DEFAULT_LIMIT
    if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
        raise BadQueryError("limit", f"`limit` must be a whole number from 1 to {MAX_LIMIT}")
    return int(raw)


def cursor_of(entry: AuditEntry) -> str:
    """The cursor that continues a page after ``entry`` (its last command)."""
    doc = msgspec.json.encode([entry.issued_at, entry.command_id])
    return base64.urlsafe_b64encode(doc).decode().rstrip("=")


def _after(params: Mapping[str, str], now: datetime) -> tuple[datetime, uuid.UUID] | None:
    # ``cursor`` is the name this parameter had before every list spoke of ``after``.
    field = "after" if "after" in params else "cursor"
    raw = params.get(field)
    if raw is None:
        return None
    refused = BadQueryError(field, f"`{field}` is not one this API gave out")
    try:
        doc = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
        at, command_id = msgspec.json.decode(doc, type=tuple[datetime, uuid.UUID])
    except (binascii.Error, ValueError, msgspec.DecodeError):
        raise refused from None
    if at.tzinfo is None:
        raise refused
    try:
        # A cursor names an issued command: never a time outside what a query may name.
        return check_time("cursor", at.astimezone(UTC), now), command_id
    except (OverflowError, TimeRefusal):
        raise refused from None


def audit_query(params: Mapping[str, str], account_id: uuid.UUID, *, now: datetime) -> AuditQuery:
    """The audit query of ``?mower=&from=&to=&kind=&limit=&after=`` in ``account_id``;
    times are held to the range a query may name (``kit.times``) as of ``now``."""
    mower: uuid.UUID | None = None
    if (raw := params.get("mower")) is not None:
        try:
            mower = uuid.UUID(raw)
        except ValueError:
            raise BadQueryError("mower", "`mower` must be a mower id (a UUID)") from None
    kind = params.get("kind")
    if kind is not None and kind not in COMMAND_KINDS:
        raise BadQueryError("kind", f"`kind` must be one of {', '.join(COMMAND_KINDS)}")
    try:
        since, until = query_range(params, now)
    except TimeRefusal as err:
        raise BadQueryError(err.field, err.detail, out_of_range=err.out_of_range) from None
    return AuditQuery(
        account_id=account_id,
        mower_id=mower,
        since=since,
        until=until,
        kind=kind,
        limit=_limit(params.get("limit")),
        before=_after(params, now),
    )
