"""The watch store's statements and the column arrays its ``unnest`` writes take."""

# Statements are assembled from module constants only, never from input:
# ruff: noqa: S608

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mowdeck.notifications.ingest.model import WatchWrite
from mowdeck.notifications.rules.watch import MowerWatch, encode_watch

__all__ = ["touch_columns", "watch_columns"]

# -- watches ---------------------------------------------------------------------------

# One lock order for every replica (mower_id): two batches meeting the same mowers
# wait for each other instead of deadlocking. observed_at and contact_at are the
# authoritative times of the watch (0003_watch_contact.sql); the reader puts them in.
_WATCH = "mower_id, watch::text, observed_at, contact_at, version"
LOCK_WATCHES = f"""
SELECT {_WATCH} FROM notification_watches
WHERE mower_id = ANY($1::uuid[]) ORDER BY mower_id FOR UPDATE
"""
# The same locks, in the same order, without the documents: a state batch reads the
# documents only of the watches its actors may not hold as stored.
LOCK_VERSIONS = """
SELECT mower_id, version, observed_at FROM notification_watches
WHERE mower_id = ANY($1::uuid[]) ORDER BY mower_id FOR UPDATE
"""
READ_WATCHES = f"""
SELECT {_WATCH} FROM notification_watches WHERE mower_id = ANY($1::uuid[])
"""
# Every replica's scan: rows another transaction holds (a state batch, another scan) are
# skipped, not waited for; the partial index on silence_due_at serves the order.
CLAIM_DUE = f"""
SELECT {_WATCH} FROM notification_watches
WHERE silence_due_at <= $1 ORDER BY silence_due_at, mower_id LIMIT $2
FOR UPDATE SKIP LOCKED
"""
# A state batch only moves silence_due_at earlier (least() of the stored and the new,
# NULL meaning never); a scan that claimed the row stores its exact answer. A write that
# did not change the document (the scan found nothing) stores only the due time; one
# that did counts a new version. The contact times never go back.
UPDATE_WATCHES = """
UPDATE notification_watches AS w SET account_id = u.a,
    watch = CASE WHEN u.changed THEN u.doc::jsonb ELSE w.watch END,
    version = w.version + CASE WHEN u.changed THEN 1 ELSE 0 END,
    observed_at = greatest(w.observed_at, u.o), contact_at = greatest(w.contact_at, u.c),
    silence_due_at = CASE WHEN u.exact THEN u.due ELSE least(w.silence_due_at, u.due) END,
    updated_at = now()
FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::timestamptz[], $5::timestamptz[],
    $6::timestamptz[], $7::bool[], $8::bool[]) AS u(m, a, doc, due, o, c, changed, exact)
WHERE w.mower_id = u.m
"""
# A heartbeat: only the contact times of locked rows (the document and the due time
# stay; the update is in place).
TOUCH_WATCHES = """
UPDATE notification_watches AS w
SET observed_at = greatest(w.observed_at, u.o), contact_at = greatest(w.contact_at, u.c)
FROM unnest($1::uuid[], $2::timestamptz[], $3::timestamptz[]) AS u(m, o, c)
WHERE w.mower_id = u.m
"""
# A watch another transaction created meanwhile is not overwritten: the batch, planned
# on "no watch yet", is rolled back and planned again on the stored one.
INSERT_WATCHES = """
INSERT INTO notification_watches (mower_id, account_id, watch, silence_due_at, observed_at,
    contact_at)
SELECT m, a, doc::jsonb, due, o, c
FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::timestamptz[], $5::timestamptz[],
    $6::timestamptz[]) AS u(m, a, doc, due, o, c)
ORDER BY m
ON CONFLICT (mower_id) DO NOTHING
"""

# -- removal -------------------------------------------------------------------------------

FORGET_MOWER = ("DELETE FROM notification_watches WHERE mower_id = $1",)


def watch_columns(writes: Sequence[WatchWrite]) -> list[list[Any]]:
    """The mower, account, watch JSON, due time, observed_at and contact_at arrays of a
    watch write (no JSON for a write that does not change the document)."""
    return [
        [w.watch.mower_id for w in writes],
        [w.watch.account_id for w in writes],
        [encode_watch(w.watch).decode() if w.changed else None for w in writes],
        [w.silence_due_at for w in writes],
        [w.watch.observed_at for w in writes],
        [w.watch.contact_at for w in writes],
    ]


def touch_columns(watches: Sequence[MowerWatch]) -> list[list[Any]]:
    """The mower, observed_at and contact_at arrays of ``TOUCH_WATCHES``."""
    return [
        [w.mower_id for w in watches],
        [w.observed_at for w in watches],
        [w.contact_at for w in watches],
    ]
