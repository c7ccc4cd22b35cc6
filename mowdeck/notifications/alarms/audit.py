"""The alarms' audit trail: every change of every alarm, who made it and when.

Each change is written in the transaction of the change itself (``notification_alarm_audit``,
``sql/notifications/0006_alarm_audit.sql``), so the trail misses nothing the alarms hold.
Account admins read it (``GET /v1/alarms/audit``, newest first, and ``/export`` as JSON
lines), beside Fleet's trail of commands: together they say who did what to the fleet.
This module is the trail's pure part: its records, its query and its parameters.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Literal

import msgspec

from mowdeck.kit.http import Problem
from mowdeck.kit.paging import page_params, read_cursor
from mowdeck.kit.times import TimeRefusal, query_range
from mowdeck.notifications.rules.kinds import Kind, Severity

__all__ = [
    "AUDIT_CHANGES",
    "AuditChange",
    "AuditPageView",
    "AuditQuery",
    "AuditRecord",
    "audit_query",
]

AuditChange = Literal["raised", "updated", "cleared", "acknowledged", "assigned", "escalated"]
AUDIT_CHANGES: tuple[AuditChange, ...] = AuditChange.__args__  # type: ignore[attr-defined]

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


class AuditRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One change of one alarm; ``by`` is who acknowledged or assigned (None: the rules)."""

    seq: int
    at: datetime
    account_id: uuid.UUID
    mower_id: uuid.UUID
    alarm_id: uuid.UUID
    change: AuditChange
    kind: Kind
    condition: str
    severity: Severity
    code: str | None = None
    by: str | None = None
    comment: str | None = None
    assignee: str | None = None


class AuditView(msgspec.Struct, frozen=True, kw_only=True):
    """A record as the API shows it (the account is the caller's)."""

    seq: int
    at: datetime
    mower_id: uuid.UUID
    alarm_id: uuid.UUID
    change: AuditChange
    kind: Kind
    condition: str
    severity: Severity
    code: str | None
    by: str | None
    comment: str | None
    assignee: str | None

    @classmethod
    def of(cls, record: AuditRecord) -> AuditView:
        """The view of ``record``."""
        fields = msgspec.structs.asdict(record)
        del fields["account_id"]
        return cls(**fields)


class AuditPageView(msgspec.Struct, frozen=True, kw_only=True):
    """A page of the trail, newest first; ``next_after`` continues it while ``has_more``."""

    items: list[AuditView]
    next_after: str | None
    has_more: bool


class AuditQuery(msgspec.Struct, frozen=True, kw_only=True):
    """Which changes of an account: ``before`` is the ``seq`` a page continues behind."""

    account_id: uuid.UUID
    mower_id: uuid.UUID | None = None
    change: AuditChange | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int = DEFAULT_LIMIT
    before: int | None = None


def _bad(name: str, detail: str, status: int = 400) -> Problem:
    title = "Bad Request" if status == 400 else "Unprocessable Content"
    return Problem(status, title, detail, type_="bad-query", extra={"field": name})


def audit_query(params: Mapping[str, str], account_id: uuid.UUID, *, now: datetime) -> AuditQuery:
    """The query of ``?mower=&change=&from=&to=&limit=&after=`` in ``account_id``."""
    mower: uuid.UUID | None = None
    if (raw := params.get("mower")) is not None:
        try:
            mower = uuid.UUID(raw)
        except ValueError:
            raise _bad("mower", "`mower` must be a mower id (a UUID)") from None
    change = params.get("change")
    if change is not None and change not in AUDIT_CHANGES:
        raise _bad("change", f"`change` must be one of {', '.join(AUDIT_CHANGES)}")
    try:
        since, until = query_range(params, now)
    except TimeRefusal as err:
        raise _bad(err.field, err.detail, 422 if err.out_of_range else 400) from None
    page = page_params(params, default=DEFAULT_LIMIT, maximum=MAX_LIMIT)
    before = None if page.after is None else read_cursor(page.after, int)
    return AuditQuery(
        account_id=account_id,
        mower_id=mower,
        change=change,
        since=since,
        until=until,
        limit=page.limit,
        before=before,
    )


def matches(record: AuditRecord, query: AuditQuery) -> bool:
    """Whether ``record`` is one ``query`` asks for (the in-memory store's filter)."""
    return (
        record.account_id == query.account_id
        and (query.mower_id is None or record.mower_id == query.mower_id)
        and (query.change is None or record.change == query.change)
        and (query.since is None or record.at >= query.since)
        and (query.until is None or record.at < query.until)
        and (query.before is None or record.seq < query.before)
    )
