"""The alarm store's SQL (``sql/notifications/0004_alarms.sql``)."""

# ruff: noqa: S608 - the f-strings put in a constant column list; values are placeholders

from __future__ import annotations

__all__ = [
    "ACKNOWLEDGE",
    "ASSIGN",
    "AUDIT_MANY",
    "AUDIT_PAGE",
    "CLEAR",
    "CLEAR_MANY",
    "ESCALATE",
    "FORGET_MOWER",
    "FORGET_USER",
    "GET",
    "LIST",
    "LIST_CLEARED",
    "LIST_OPEN",
    "OPEN_COUNTS",
    "PRUNE",
    "PRUNE_AUDIT",
    "RAISE",
    "RAISE_MANY",
]

_COLUMNS = """id, account_id, mower_id, condition, kind, severity, state, first_at, latest_at,
    count, code, params, acknowledged_by, acknowledged_at, comment, assignee, assigned_by,
    assigned_at, cleared_at, escalated_at"""

# Raised or told again: an open alarm of the mower's condition is updated instead. One
# statement per change, in the order decided (a condition may clear and open again within
# one batch); changes are rare beside the states that decide them.
RAISE = """
INSERT INTO notification_alarms AS a (id, account_id, mower_id, condition, kind, severity,
    state, code, params, first_at, latest_at)
VALUES ($1, $2, $3, $4, $5, $6, 'active', $7, $8::jsonb, $9, $9)
ON CONFLICT (mower_id, condition) WHERE state <> 'cleared'
DO UPDATE SET latest_at = greatest(a.latest_at, excluded.latest_at), count = a.count + 1,
    params = excluded.params
RETURNING {columns}, (xmax = 0) AS inserted
"""

# The same for many changes of distinct mowers and conditions (the common batch).
RAISE_MANY = """
INSERT INTO notification_alarms AS a (id, account_id, mower_id, condition, kind, severity,
    state, code, params, first_at, latest_at)
SELECT r.id, r.account_id, r.mower_id, r.condition, r.kind, r.severity, 'active', r.code,
    r.params, r.at, r.at
FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::text[],
    $7::text[], $8::jsonb[], $9::timestamptz[])
    AS r(id, account_id, mower_id, condition, kind, severity, code, params, at)
ON CONFLICT (mower_id, condition) WHERE state <> 'cleared'
DO UPDATE SET latest_at = greatest(a.latest_at, excluded.latest_at), count = a.count + 1,
    params = excluded.params
RETURNING {columns}, (xmax = 0) AS inserted
"""

CLEAR_MANY = """
UPDATE notification_alarms AS a SET state = 'cleared', cleared_at = c.at
FROM unnest($1::uuid[], $2::text[], $3::timestamptz[]) AS c(mower_id, condition, at)
WHERE a.mower_id = c.mower_id AND a.condition = c.condition AND a.state <> 'cleared'
RETURNING {columns}
"""

CLEAR = """
UPDATE notification_alarms SET state = 'cleared', cleared_at = $3
WHERE mower_id = $1 AND condition = $2 AND state <> 'cleared'
RETURNING {columns}
"""

_LIST = """
SELECT {columns} FROM notification_alarms
WHERE account_id = $1 AND state = ANY($2::text[]) AND {partial}
  AND ($3::uuid[] IS NULL OR mower_id IN (SELECT unnest($3::uuid[])))
  AND ($4::text IS NULL OR severity = $4)
  AND ($5::timestamptz IS NULL OR (latest_at, id) < ($5, $6::uuid))
ORDER BY latest_at DESC, id DESC
LIMIT $7
"""
# Each on the partial index its literal condition names (a parameter cannot choose one).
LIST_OPEN = _LIST.format(columns=_COLUMNS, partial="state <> 'cleared'")
LIST_CLEARED = _LIST.format(columns=_COLUMNS, partial="state = 'cleared'")
LIST = _LIST.format(columns=_COLUMNS, partial="true")

GET = f"SELECT {_COLUMNS} FROM notification_alarms WHERE account_id = $1 AND id = $2"

_AUDIT_COLUMNS = """at, account_id, mower_id, alarm_id, change, kind, condition, severity,
    code, by_user, comment, assignee"""

# Each change and its line in the trail in one statement (0006_alarm_audit.sql).
ACKNOWLEDGE = f"""
WITH a AS (
    UPDATE notification_alarms SET
        state = CASE WHEN state = 'active' THEN 'acknowledged' ELSE state END,
        acknowledged_by = coalesce(acknowledged_by, $2),
        acknowledged_at = coalesce(acknowledged_at, $3),
        comment = coalesce($4, comment)
    WHERE id = $1
    RETURNING {_COLUMNS}
), trail AS (
    INSERT INTO notification_alarm_audit ({_AUDIT_COLUMNS})
    SELECT $3, account_id, mower_id, id, 'acknowledged', kind, condition, severity, code,
        $2, $4, NULL
    FROM a
)
SELECT * FROM a
"""

ASSIGN = f"""
WITH a AS (
    UPDATE notification_alarms SET assignee = $2, assigned_by = $3, assigned_at = $4
    WHERE id = $1
    RETURNING {_COLUMNS}
), trail AS (
    INSERT INTO notification_alarm_audit ({_AUDIT_COLUMNS})
    SELECT $4, account_id, mower_id, id, 'assigned', kind, condition, severity, code,
        $3, NULL, $2
    FROM a
)
SELECT * FROM a
"""

# What the watches decided, in the watches' transaction (after the alarms' statements).
AUDIT_MANY = f"""
INSERT INTO notification_alarm_audit ({_AUDIT_COLUMNS})
SELECT * FROM unnest($1::timestamptz[], $2::uuid[], $3::uuid[], $4::uuid[], $5::text[],
    $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[])
"""

AUDIT_PAGE = """
SELECT seq, at, account_id, mower_id, alarm_id, change, kind, condition, severity, code,
    by_user AS by, comment, assignee
FROM notification_alarm_audit
WHERE account_id = $1
  AND ($2::uuid IS NULL OR mower_id = $2)
  AND ($3::text IS NULL OR change = $3)
  AND ($4::timestamptz IS NULL OR at >= $4)
  AND ($5::timestamptz IS NULL OR at < $5)
  AND ($6::bigint IS NULL OR seq < $6)
ORDER BY seq DESC
LIMIT $7
"""

# Critical alarms unacknowledged since before $1: marked escalated at $2 (each once, by
# whichever replica claims it) with their line in the trail; the caller writes the admins'
# pending events in the same transaction.
ESCALATE = f"""
WITH due AS (
    SELECT id FROM notification_alarms
    WHERE state = 'active' AND severity = 'critical' AND escalated_at IS NULL
      AND first_at <= $1
    ORDER BY first_at LIMIT $3
    FOR UPDATE SKIP LOCKED
), a AS (
    UPDATE notification_alarms AS n SET escalated_at = $2 FROM due WHERE n.id = due.id
    RETURNING {", ".join(f"n.{c.strip()}" for c in _COLUMNS.split(","))}
), trail AS (
    INSERT INTO notification_alarm_audit ({_AUDIT_COLUMNS})
    SELECT $2, account_id, mower_id, id, 'escalated', kind, condition, severity, code,
        NULL, NULL, NULL
    FROM a
)
SELECT * FROM a
"""

# The only delete the trail allows: the retention round's, on its own transaction.
PRUNE_AUDIT = (
    "SET LOCAL mowdeck.audit_retention = 'on'",
    "DELETE FROM notification_alarm_audit WHERE at < $1",
)

OPEN_COUNTS = """
SELECT kind, severity, count(*) FROM notification_alarms WHERE state <> 'cleared'
GROUP BY kind, severity
"""

PRUNE = "DELETE FROM notification_alarms WHERE state = 'cleared' AND cleared_at < $1"

FORGET_MOWER = ("DELETE FROM notification_alarms WHERE mower_id = $1",)

# A deleted user's name leaves the alarms they acknowledged or were assigned (not counted).
FORGET_USER = (
    "UPDATE notification_alarms SET acknowledged_by = NULL WHERE acknowledged_by = $1",
    "UPDATE notification_alarms SET assignee = NULL WHERE assignee = $1",
    "UPDATE notification_alarms SET assigned_by = NULL WHERE assigned_by = $1",
)

RAISE = RAISE.format(columns=_COLUMNS)
RAISE_MANY = RAISE_MANY.format(columns=_COLUMNS)
CLEAR = CLEAR.format(columns=_COLUMNS)
# Qualified: the unnest's columns share two of the names.
CLEAR_MANY = CLEAR_MANY.format(columns=", ".join(f"a.{c.strip()}" for c in _COLUMNS.split(",")))
