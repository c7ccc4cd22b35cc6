"""The audit API's pure rules: query parameters and cursors."""

from __future__ import annotations

import base64
import uuid
from datetime import UTC, datetime

import msgspec
import pytest

from contracts.v1 import FINAL_STATUSES
from mowdeck.fleet import postgres_commands
from mowdeck.fleet.audit import audit_query, cursor_of
from mowdeck.fleet.errors import BadQueryError
from mowdeck.fleet.ports import AuditEntry

ACCOUNT = uuid.UUID(int=1)
NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def _cursor(at: str) -> str:
    doc = msgspec.json.encode([at, str(uuid.UUID(int=9))])
    return base64.urlsafe_b64encode(doc).decode().rstrip("=")


def test_a_cursor_continues_after_the_entry_it_was_made_from() -> None:
    entry = AuditEntry(
        command_id=uuid.uuid4(),
        account_id=ACCOUNT,
        mower_id=uuid.uuid4(),
        kind="pause_mow",
        command=msgspec.Raw(b'{"kind":"pause_mow"}'),
        issued_by="user:a",
        issued_at=datetime(2026, 5, 1, 12, 0, 0, 123456, tzinfo=UTC),
        expires_at=datetime(2026, 5, 1, 12, 0, 30, tzinfo=UTC),
        statuses=[],
    )
    query = audit_query({"cursor": cursor_of(entry)}, ACCOUNT, now=NOW)
    assert query.before == (entry.issued_at, entry.command_id)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, {"limit": 100, "kind": None, "since": None}),
        ({"limit": "5", "kind": "emergency_stop"}, {"limit": 5, "kind": "emergency_stop"}),
        (
            {"from": "2026-05-01T00:00:00Z"},
            {"since": datetime(2026, 5, 1, tzinfo=UTC)},
        ),
        ({"mower": str(uuid.UUID(int=7))}, {"mower_id": uuid.UUID(int=7)}),
    ],
    ids=["defaults", "limit-and-kind", "from", "mower"],
)
def test_good_parameters_make_the_query(
    params: dict[str, str], expected: dict[str, object]
) -> None:
    query = audit_query(params, ACCOUNT, now=NOW)
    assert query.account_id == ACCOUNT
    for name, value in expected.items():
        assert getattr(query, name) == value


@pytest.mark.parametrize(
    ("params", "field", "out_of_range"),
    [
        ({"limit": "-1"}, "limit", False),
        ({"limit": "\uff11"}, "limit", False),  # a full-width digit
        ({"from": "2026-05-01 00:00:00 00:00"}, "from", False),  # "+" decoded as a space
        ({"cursor": "W10"}, "cursor", False),  # valid base64 of "[]"
        ({"cursor": "WyIyMDI2LTA1LTAxVDAwOjAwOjAwIiwgIngiXQ"}, "cursor", False),
        # Before the first representable instant once in UTC: the database's data error
        # was answered as an outage (503) before.
        ({"from": "0001-01-01T00:00:00+01:00"}, "from", True),
        ({"to": "9999-12-31T23:59:59.999999Z"}, "to", True),  # `infinity` to PostgreSQL
        ({"from": "1999-12-31T23:59:59Z"}, "from", True),
        ({"cursor": _cursor("0001-01-01T00:00:00+01:00")}, "cursor", False),
        ({"cursor": _cursor("9999-12-31T23:59:59.999999Z")}, "cursor", False),
        ({"limit": ""}, "limit", False),
        ({"after": ""}, "after", False),
        ({"after": "W10", "cursor": _cursor("2026-05-01T00:00:00Z")}, "after", False),
        ({"mower": ""}, "mower", False),
        ({"from": ""}, "from", False),
        ({"kind": ""}, "kind", False),
        ({"from": "2026-05-01T00:00:00Z", "to": "2026-05-01T00:00:00Z"}, "to", True),
    ],
    ids=[
        "negative-limit",
        "wide-digit",
        "plus-as-space",
        "empty-cursor",
        "naive-cursor",
        "before-year-one",
        "end-of-time",
        "before-2000",
        "cursor-before-year-one",
        "cursor-end-of-time",
        "empty-limit",
        "empty-after",
        "after-wins-over-cursor",
        "empty-mower",
        "empty-from",
        "empty-kind",
        "empty-window",
    ],
)
def test_bad_parameters_are_refused_by_name(
    params: dict[str, str], field: str, out_of_range: bool
) -> None:
    with pytest.raises(BadQueryError) as err:
        audit_query(params, ACCOUNT, now=NOW)
    assert (err.value.field, err.value.out_of_range) == (field, out_of_range)


def test_the_statements_spell_out_every_final_status() -> None:
    statuses = ", ".join(f"'{s}'" for s in sorted(FINAL_STATUSES))
    for statement in (postgres_commands._INSERT_STATUSES, postgres_commands._FINALIZE):
        assert f"IN ({statuses})" in statement
