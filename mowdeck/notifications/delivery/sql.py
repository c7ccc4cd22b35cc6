"""The PostgreSQL statements of targets and deliveries."""

# Statements are assembled from module constants only, never from input:
# ruff: noqa: S608

from __future__ import annotations

CHANNEL = "notification_deliveries"
"""The NOTIFY channel a commit with new deliveries signals."""

# -- targets -----------------------------------------------------------------------------

# One browser, one owner: the endpoint's row of another user goes first (with its
# deliveries), then the user's own row is replaced or created.
TAKE_ENDPOINT = "DELETE FROM notification_targets WHERE endpoint = $1 AND user_id <> $2"
PUT_TARGET = """
INSERT INTO notification_targets (user_id, channel, target, endpoint)
VALUES ($1, $2, $3::jsonb, $4)
ON CONFLICT (endpoint) DO UPDATE SET target = excluded.target
RETURNING id, user_id, target::text AS target, created_at
"""
# Pages by keyset on notification_targets_user (user_id, created_at, id); NULL: no limit.
LIST_TARGETS = """
SELECT id, user_id, target::text AS target, created_at FROM notification_targets
WHERE user_id = $1 ORDER BY created_at, id LIMIT $2
"""
LIST_TARGETS_AFTER = """
SELECT id, user_id, target::text AS target, created_at FROM notification_targets
WHERE user_id = $1 AND (created_at, id) > ($3, $4) ORDER BY created_at, id LIMIT $2
"""
DELETE_TARGET = "DELETE FROM notification_targets WHERE user_id = $1 AND id = $2"
DELETE_TARGETS_BY_ID = "DELETE FROM notification_targets WHERE id = ANY($1::uuid[])"

# -- the fan-out's writes ------------------------------------------------------------------

_COLUMNS = """target_id, user_id, channel, kind, mower_id, severity, dedupe_key,
    message_key, params, occurred_at, next_attempt_at"""
# One row per target of each new item not held ($1..$8: one element per item), due at
# once: due since the event occurred (so the oldest due age tells how late delivery is),
# or now for an event from a clock running ahead.
# The workers are woken in the same statement when rows were queued (one round trip less
# in the fan-out's transaction); PostgreSQL delivers the notification at commit.
QUEUE_DELIVERIES = f"""
WITH queued AS (
    INSERT INTO notification_deliveries ({_COLUMNS})
    SELECT t.id, t.user_id, t.channel, e.k, e.m, e.s, e.d, e.mk, e.p::jsonb, e.o, least(e.o, now())
    FROM unnest($1::text[], $2::text[], $3::uuid[], $4::text[], $5::text[], $6::text[],
        $7::text[], $8::timestamptz[]) AS e(u, k, m, s, d, mk, p, o)
    JOIN notification_targets AS t ON t.user_id = e.u
    ORDER BY t.id, e.d
    ON CONFLICT (target_id, dedupe_key) DO NOTHING
    RETURNING 1
), counted AS (SELECT count(*) AS n FROM queued)
SELECT n, CASE WHEN n > 0 THEN pg_notify('{CHANNEL}', '') END AS woke FROM counted
"""
QUIET_OF = """
SELECT user_id, timezone, quiet_start, quiet_end, quiet_allow_critical
FROM notification_preferences WHERE user_id = ANY($1::text[])
"""
# One summary per target and quiet window: the first held item creates it, every
# further one counts itself in (while it has not been sent yet). The held items of one
# batch are summed per user and window first: a statement may touch a row only once.
QUEUE_SUMMARIES = f"""
INSERT INTO notification_deliveries ({_COLUMNS})
SELECT t.id, t.user_id, t.channel, $3, NULL, 'info',
    $3 || ':' || s.epoch, $3, jsonb_build_object('count', s.n), s.ends, s.ends
FROM (
    SELECT user_id, extract(epoch FROM ends)::bigint AS epoch, min(ends) AS ends, count(*) AS n
    FROM unnest($1::text[], $2::timestamptz[]) AS h(user_id, ends)
    GROUP BY user_id, extract(epoch FROM ends)::bigint
) AS s
JOIN notification_targets AS t ON t.user_id = s.user_id
ORDER BY t.id, s.epoch
ON CONFLICT (target_id, dedupe_key) DO UPDATE
SET params = jsonb_set(notification_deliveries.params, '{{count}}',
    to_jsonb((notification_deliveries.params->>'count')::int + (excluded.params->>'count')::int))
WHERE notification_deliveries.state = 'due'
"""

# -- the workers -----------------------------------------------------------------------------

CLAIM = """
UPDATE notification_deliveries AS d
SET attempts = d.attempts + 1, next_attempt_at = $1::timestamptz + $3::interval
FROM (
    SELECT id FROM notification_deliveries
    WHERE state = 'due' AND next_attempt_at <= $1
    ORDER BY next_attempt_at, id LIMIT $2 FOR UPDATE SKIP LOCKED
) AS due
JOIN notification_targets AS t ON true
LEFT JOIN notification_preferences AS p ON p.user_id = t.user_id
WHERE d.id = due.id AND t.id = d.target_id
RETURNING d.id, d.target_id, d.user_id, d.channel, t.target::text AS target, d.kind,
    d.mower_id, d.severity, d.dedupe_key, d.message_key, d.params::text AS params,
    d.occurred_at, d.attempts, coalesce(p.locale, 'en') AS locale,
    coalesce(p.timezone, 'UTC') AS timezone
"""
# Outcomes by id and the claim's attempt: a claim taken over after its lease is stale.
FINISH = """
UPDATE notification_deliveries AS d
SET state = u.state, finished_at = $1, last_error = nullif(u.error, '')
FROM unnest($2::bigint[], $3::int[], $4::text[], $5::text[]) AS u(id, attempts, state, error)
WHERE d.id = u.id AND d.attempts = u.attempts AND d.state = 'due'
"""
RETRY = """
UPDATE notification_deliveries AS d SET next_attempt_at = u.at, last_error = u.error
FROM unnest($1::bigint[], $2::int[], $3::timestamptz[], $4::text[]) AS u(id, attempts, at, error)
WHERE d.id = u.id AND d.attempts = u.attempts AND d.state = 'due'
"""
BACKLOG = """
SELECT count(*) AS due, min(next_attempt_at) AS oldest FROM notification_deliveries
WHERE state = 'due' AND next_attempt_at <= $1
"""

# -- removal -------------------------------------------------------------------------------

DELETE_USER = (
    "DELETE FROM notification_deliveries WHERE user_id = $1",
    "DELETE FROM notification_targets WHERE user_id = $1",
)
FORGET_MOWER = ("DELETE FROM notification_deliveries WHERE mower_id = $1",)
