"""The inbox's statements: pending events, the inbox, preferences, and removal."""

# Statements are assembled from module constants only, never from input:
# ruff: noqa: S608

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from mowdeck.notifications.rules.events import RuleEvent

__all__ = ["event_columns"]

_encode = msgspec.json.Encoder().encode

# -- pending events ----------------------------------------------------------------------

_EVENT = "mower_id, account_id, kind, severity, dedupe_key, message_key, params, occurred_at"
INSERT_PENDING = f"""
INSERT INTO notification_pending ({_EVENT})
SELECT m, a, k, s, d, mk, p::jsonb, o
FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[],
    $7::text[], $8::timestamptz[]) AS u(m, a, k, s, d, mk, p, o)
"""
CLAIM_PENDING = """
UPDATE notification_pending AS p
SET attempts = p.attempts + 1, claimed_until = $1::timestamptz + $3::interval
FROM (
    SELECT id FROM notification_pending WHERE claimed_until <= $1
    ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED
) AS due
WHERE p.id = due.id
RETURNING p.id, p.mower_id, p.account_id, p.kind, p.severity, p.dedupe_key, p.message_key,
    p.params::text AS params, p.occurred_at, p.attempts
"""
DELETE_PENDING = "DELETE FROM notification_pending WHERE id = $1"
DELETE_PENDINGS = "DELETE FROM notification_pending WHERE id = ANY($1::bigint[])"

# -- inbox -------------------------------------------------------------------------------

INSERT_INBOX = """
INSERT INTO notification_inbox (user_id, held_by_quiet_hours, account_id, mower_id, kind,
    severity, dedupe_key, message_key, params, occurred_at)
SELECT e.u, e.h, $3, $4, $5, $6, $7, $8, $9::jsonb, $10
FROM unnest($1::text[], $2::bool[]) AS e(u, h)
ORDER BY e.u
ON CONFLICT (user_id, dedupe_key) DO NOTHING
RETURNING id, user_id, held_by_quiet_hours
"""
# The items of several events at once, one row per recipient; $1 orders the events so
# that of two in one batch with the same user and dedupe key the earlier one is kept.
INSERT_INBOX_MANY = """
INSERT INTO notification_inbox (user_id, held_by_quiet_hours, account_id, mower_id, kind,
    severity, dedupe_key, message_key, params, occurred_at)
SELECT e.u, e.h, e.a, e.m, e.k, e.s, e.d, e.mk, e.p::jsonb, e.o
FROM unnest($1::int[], $2::text[], $3::bool[], $4::uuid[], $5::uuid[], $6::text[], $7::text[],
    $8::text[], $9::text[], $10::text[], $11::timestamptz[]) AS e(n, u, h, a, m, k, s, d, mk, p, o)
ORDER BY e.u, e.n
ON CONFLICT (user_id, dedupe_key) DO NOTHING
RETURNING id, user_id, dedupe_key, held_by_quiet_hours
"""
# Per user: the (limit + 1)-th newest item and everything older go. The lateral finds
# the edge with a backward walk of the page index, limit entries deep.
TRIM_INBOX = """
DELETE FROM notification_inbox AS i
USING unnest($1::text[]) AS u(user_id)
CROSS JOIN LATERAL (
    SELECT occurred_at, id FROM notification_inbox
    WHERE user_id = u.user_id
    ORDER BY occurred_at DESC, id DESC OFFSET $2 LIMIT 1
) AS edge
WHERE i.user_id = u.user_id AND (i.occurred_at, i.id) <= (edge.occurred_at, edge.id)
RETURNING i.id
"""
_ITEM = """id, user_id, account_id, mower_id, kind, severity, dedupe_key, message_key,
    params::text AS params, occurred_at, read, held_by_quiet_hours"""
INBOX_FIRST = f"""
SELECT {_ITEM} FROM notification_inbox WHERE user_id = $1
ORDER BY occurred_at DESC, id DESC LIMIT $2
"""
INBOX_AFTER = f"""
SELECT {_ITEM} FROM notification_inbox
WHERE user_id = $1 AND (occurred_at, id) < ($3::timestamptz, $4::uuid)
ORDER BY occurred_at DESC, id DESC LIMIT $2
"""
UNREAD = "SELECT count(*) FROM notification_inbox WHERE user_id = $1 AND NOT read"
MARK_READ = """
UPDATE notification_inbox SET read = true
WHERE user_id = $1 AND id = ANY($2::uuid[]) RETURNING id
"""

# -- preferences ---------------------------------------------------------------------------

_PREFS = """user_id, account_id, scope, mowers, kinds::text AS kinds, locale, timezone,
    quiet_start, quiet_end, quiet_allow_critical"""
GET_PREFERENCES = f"SELECT {_PREFS} FROM notification_preferences WHERE user_id = $1"
PUT_PREFERENCES = """
INSERT INTO notification_preferences (user_id, account_id, scope, mowers, kinds, locale,
    timezone, quiet_start, quiet_end, quiet_allow_critical)
VALUES ($1, $2, $3, $4::uuid[], $5::jsonb, $6, $7, $8, $9, $10)
ON CONFLICT (user_id) DO UPDATE SET account_id = excluded.account_id,
    scope = excluded.scope, mowers = excluded.mowers, kinds = excluded.kinds,
    locale = excluded.locale, timezone = excluded.timezone,
    quiet_start = excluded.quiet_start, quiet_end = excluded.quiet_end,
    quiet_allow_critical = excluded.quiet_allow_critical, updated_at = now()
"""
SUBSCRIBERS = f"""
SELECT {_PREFS} FROM notification_preferences
WHERE account_id = $1 AND scope <> 'none' ORDER BY user_id
"""
SUBSCRIBERS_OF = f"""
SELECT {_PREFS} FROM notification_preferences
WHERE account_id = ANY($1::uuid[]) AND scope <> 'none' ORDER BY account_id, user_id
"""

# -- removal -------------------------------------------------------------------------------

DELETE_USER = (
    "DELETE FROM notification_preferences WHERE user_id = $1",
    "DELETE FROM notification_inbox WHERE user_id = $1",
)
FORGET_MOWER = (
    "DELETE FROM notification_pending WHERE mower_id = $1",
    "DELETE FROM notification_inbox WHERE mower_id = $1",
)
UNSELECT_MOWER = """
UPDATE notification_preferences SET mowers = array_remove(mowers, $1), updated_at = now()
WHERE $1 = ANY(mowers)
"""


def event_columns(events: Sequence[RuleEvent]) -> list[list[Any]]:
    """The 8 arrays of ``INSERT_PENDING``."""
    return [
        [e.mower_id for e in events],
        [e.account_id for e in events],
        [e.kind for e in events],
        [e.severity for e in events],
        [e.dedupe_key for e in events],
        [e.message_key for e in events],
        [_encode(e.params).decode() for e in events],
        [e.occurred_at for e in events],
    ]
