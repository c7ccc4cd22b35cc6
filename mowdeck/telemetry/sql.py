"""The PostgreSQL store's statements and the column arrays its ``unnest`` writes take."""

# Statements are assembled from module constants only, never from input:
# ruff: noqa: S608

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from contracts.v1 import MowerState
from mowdeck.telemetry.model import Memory

__all__ = [
    "BIN_COLUMNS",
    "STATE_COLUMNS",
    "history_columns",
    "latest_columns",
    "position_columns",
]

_raw = msgspec.json.Encoder()

STATE_COLUMNS = (
    "mower_id",
    "account_id",
    "observed_at",
    "activity",
    "battery",
    "charging",
    "rtk_fix",
    "rtk_source",
    "connection",
    "blade_height_mm",
    "speed_mps",
    "error_code",
)
BIN_COLUMNS = (
    "bin",
    "activity",
    "rtk_fix",
    "error_code",
    "battery",
    "battery_min",
    "battery_max",
    "charging",
    "samples",
)
# postgres._memory unpacks a row of these columns in this order.
_MEMORY = "mower_id, account_id, observed_at, history_at, state_fp, track_lat, track_lon, track_fix"

MEMORIES = f"SELECT {_MEMORY} FROM mower_latest WHERE mower_id = ANY($1::uuid[])"
# The rows of a batch are read FOR UPDATE first (in mower_id order), so a racing replica
# waits for this commit and then sees the newer rows; the upsert's WHERE is the guard.
LOCK_LATEST = (
    f"SELECT {_MEMORY} FROM mower_latest WHERE mower_id = ANY($1::uuid[])"
    " ORDER BY mower_id FOR UPDATE"
)
UPSERT_LATEST = """
INSERT INTO mower_latest (mower_id, account_id, observed_at, activity, battery, charging,
    rtk_fix, rtk_source, connection, blade_height_mm, speed_mps, error_code, lat, lon,
    heading_deg, raw, history_at, state_fp, track_lat, track_lon, track_fix)
SELECT m, a, o, act, b, c, f, src, conn, bh, sp, e, la, lo, hd, r::jsonb, ha, fp, tla, tlo, tf
FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[], $4::text[], $5::int2[], $6::bool[],
    $7::text[], $8::text[], $9::text[], $10::int2[], $11::float8[], $12::text[],
    $13::float8[], $14::float8[], $15::float8[], $16::text[], $17::timestamptz[],
    $18::int8[], $19::float8[], $20::float8[], $21::text[])
    AS u(m, a, o, act, b, c, f, src, conn, bh, sp, e, la, lo, hd, r, ha, fp, tla, tlo, tf)
ON CONFLICT (mower_id) DO UPDATE SET
    observed_at = excluded.observed_at, activity = excluded.activity,
    battery = excluded.battery, charging = excluded.charging, rtk_fix = excluded.rtk_fix,
    rtk_source = excluded.rtk_source, connection = excluded.connection,
    blade_height_mm = excluded.blade_height_mm, speed_mps = excluded.speed_mps,
    error_code = excluded.error_code, lat = excluded.lat, lon = excluded.lon,
    heading_deg = excluded.heading_deg, raw = excluded.raw, history_at = excluded.history_at,
    state_fp = excluded.state_fp, track_lat = excluded.track_lat,
    track_lon = excluded.track_lon, track_fix = excluded.track_fix, updated_at = now()
WHERE mower_latest.observed_at <= excluded.observed_at
  AND mower_latest.account_id = excluded.account_id
"""
INSERT_HISTORY = """
INSERT INTO mower_history (mower_id, observed_at, account_id, activity, battery, charging,
    rtk_fix, rtk_source, connection, blade_height_mm, speed_mps, error_code)
SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::uuid[], $4::text[], $5::int2[],
    $6::bool[], $7::text[], $8::text[], $9::text[], $10::int2[], $11::float8[], $12::text[])
ON CONFLICT DO NOTHING
"""
# The latest states of mowers an older state was written to the history for, appended to
# the history after it, and their rows' history_at moved to them (one statement; the rows
# are locked by the batch already, and history_at is not indexed: a HOT update).
REASSERT_HISTORY = """
WITH latest AS (
    UPDATE mower_latest SET history_at = observed_at
    WHERE mower_id = ANY($1::uuid[])
    RETURNING mower_id, observed_at, account_id, activity, battery, charging, rtk_fix,
        rtk_source, connection, blade_height_mm, speed_mps, error_code
)
INSERT INTO mower_history (mower_id, observed_at, account_id, activity, battery, charging,
    rtk_fix, rtk_source, connection, blade_height_mm, speed_mps, error_code)
SELECT * FROM latest
ON CONFLICT DO NOTHING
"""
INSERT_POSITIONS = """
INSERT INTO mower_positions (mower_id, observed_at, account_id, lat, lon, heading_deg, rtk_fix)
SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::uuid[], $4::float8[], $5::float8[],
    $6::float8[], $7::text[])
ON CONFLICT DO NOTHING
"""
DIRECTORY_ONE = "SELECT account_id FROM mower_directory WHERE mower_id = $1 AND removed_at IS NULL"
DIRECTORY_MANY = (
    "SELECT mower_id, account_id FROM mower_directory"
    " WHERE mower_id = ANY($1::uuid[]) AND removed_at IS NULL"
)
# The seed only fills what no event has spoken about: events win.
SEED = """
INSERT INTO mower_directory (mower_id, account_id)
SELECT * FROM unnest($1::uuid[], $2::uuid[])
ON CONFLICT (mower_id) DO UPDATE SET account_id = excluded.account_id, updated_at = now()
WHERE mower_directory.event_at IS NULL
"""
REGISTER = """
INSERT INTO mower_directory (mower_id, account_id, event_at) VALUES ($1, $2, $3)
ON CONFLICT (mower_id) DO UPDATE SET account_id = excluded.account_id,
    event_at = excluded.event_at, removed_at = NULL, updated_at = now()
WHERE mower_directory.event_at IS NULL OR mower_directory.event_at <= excluded.event_at
"""
# The mower's directory row, locked for the registration that follows in the transaction.
DIRECTORY_FOR_UPDATE = "SELECT removed_at FROM mower_directory WHERE mower_id = $1 FOR UPDATE"
TOMBSTONE = """
INSERT INTO mower_directory (mower_id, account_id, event_at, removed_at)
VALUES ($1, '00000000-0000-0000-0000-000000000000', $2, $2)
ON CONFLICT (mower_id) DO UPDATE SET event_at = excluded.event_at,
    removed_at = excluded.removed_at, updated_at = now()
WHERE mower_directory.event_at IS NULL OR mower_directory.event_at <= excluded.event_at
"""
PURGE = (
    "DELETE FROM mower_latest WHERE mower_id = $1",
    "DELETE FROM mower_history WHERE mower_id = $1",
    "DELETE FROM mower_positions WHERE mower_id = $1",
    "DELETE FROM command_timeline WHERE mower_id = $1",
)
TIMELINE_INSERT = """
INSERT INTO command_timeline (command_id, status, mower_id, account_id, at, reason, kind)
VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING
"""
_STATE = ", ".join(STATE_COLUMNS) + ", lat, lon, heading_deg, raw::text AS raw"
LATEST_ONE = f"SELECT {_STATE} FROM mower_latest WHERE account_id = $1 AND mower_id = $2"
# Pages by keyset on mower_latest_account (account_id, mower_id): the first one, then
# those behind a mower id (the last parameter); a NULL limit is none.
LATEST_ACCOUNT = (
    f"SELECT {_STATE} FROM mower_latest WHERE account_id = $1 ORDER BY mower_id LIMIT $2"
)
LATEST_ACCOUNT_AFTER = (
    f"SELECT {_STATE} FROM mower_latest WHERE account_id = $1 AND mower_id > $3"
    " ORDER BY mower_id LIMIT $2"
)
LATEST_SOME = (
    f"SELECT {_STATE} FROM mower_latest WHERE account_id = $1 AND mower_id = ANY($3::uuid[])"
    " ORDER BY mower_id LIMIT $2"
)
LATEST_SOME_AFTER = (
    f"SELECT {_STATE} FROM mower_latest WHERE account_id = $1 AND mower_id = ANY($3::uuid[])"
    " AND mower_id > $4 ORDER BY mower_id LIMIT $2"
)
_RANGE = "account_id = $1 AND mower_id = $2 AND observed_at >= $3 AND observed_at < $4"
HISTORY = f"""
SELECT observed_at, activity, battery, charging, rtk_fix, rtk_source, connection,
    blade_height_mm, speed_mps, error_code
FROM mower_history WHERE {_RANGE} ORDER BY observed_at LIMIT $5
"""
TRACK = f"""
SELECT observed_at, lat, lon, heading_deg, rtk_fix
FROM mower_positions WHERE {_RANGE} ORDER BY observed_at LIMIT $5
"""
TIMELINE = """
SELECT command_id, status, mower_id, account_id, at, reason, kind FROM command_timeline
WHERE account_id = $1 AND mower_id = $2 AND at >= $3 AND at < $4
ORDER BY at, command_id, status LIMIT $5
"""
_ORIGIN = "TIMESTAMPTZ '2000-01-01 00:00:00+00'"
# Mirrored by bins.downsample: per bin the last activity, fix and error code, the rounded
# mean and the extremes of the battery, charging if any sample charged, the sample count,
# and the last track point of the same bin. The bins are generated (``date_bin`` places
# the first, the rest follow at ``step``), and each is three index range scans: the
# aggregate over the bin's rows (index-only: the primary key carries account, battery and
# charging), its last row, and its last track point. Grouping the rows instead costs a
# hash or a sort of every row; this walks the index in order and never does either.
# The mean is ``sum / count`` in numeric: ``avg`` of a smallint keeps an array as its
# state, several times the cost per row, for the same result.
# The step ($5) is rebuilt from its seconds: an interval with days ("1 day", as asyncpg
# sends a timedelta) added to a timestamptz steps by calendar days in the session's time
# zone (23 or 25 hours across a DST change); one of seconds only is a fixed length, as
# ``date_bin`` and the pure helper count.
_STEP = "make_interval(secs => extract(epoch FROM $5::interval)::float8)"
_BIN = f"observed_at >= greatest(b.bin, $3) AND observed_at < least(b.bin + {_STEP}, $4)"
HISTORY_BINS = f"""
SELECT b.bin, h.activity, h.rtk_fix, h.error_code, a.battery, a.battery_min, a.battery_max,
    a.charging, a.samples, p.lat, p.lon, p.heading_deg
FROM generate_series(
    date_bin({_STEP}, $3::timestamptz, {_ORIGIN}),
    $4::timestamptz - interval '1 microsecond',
    {_STEP}
) AS b(bin)
CROSS JOIN LATERAL (
    SELECT round(sum(battery)::numeric / count(*))::int AS battery,
        min(battery)::int AS battery_min, max(battery)::int AS battery_max,
        bool_or(charging) AS charging, count(*)::int AS samples
    FROM mower_history WHERE account_id = $1 AND mower_id = $2 AND {_BIN}
) a
CROSS JOIN LATERAL (
    SELECT activity, rtk_fix, error_code FROM mower_history
    WHERE account_id = $1 AND mower_id = $2 AND {_BIN}
    ORDER BY observed_at DESC LIMIT 1
) h
LEFT JOIN LATERAL (
    SELECT lat, lon, heading_deg FROM mower_positions
    WHERE account_id = $1 AND mower_id = $2 AND {_BIN}
    ORDER BY observed_at DESC LIMIT 1
) p ON true
WHERE a.samples > 0
ORDER BY b.bin
"""


def latest_columns(rows: Sequence[tuple[MowerState, Memory]]) -> list[list[Any]]:
    """The 21 arrays of ``UPSERT_LATEST``."""
    # A tuple per row, transposed by ``zip``: one append per row instead of 21.
    values = []
    for state, memory in rows:
        pos = state.position
        track = memory.track
        values.append(
            (
                state.mower_id,
                state.account_id,
                state.observed_at,
                state.activity,
                state.battery,
                state.charging,
                state.rtk_fix,
                state.rtk_source,
                state.connection,
                state.blade_height_mm,
                state.speed_mps,
                state.error_code,
                None if pos is None else pos.lat,
                None if pos is None else pos.lon,
                None if pos is None else pos.heading_deg,
                # Most states carry no raw fields: no encoder call for the empty object.
                _raw.encode(state.raw).decode() if state.raw else "{}",
                memory.history_at,
                memory.state_fp,
                None if track is None else track.lat,
                None if track is None else track.lon,
                None if track is None else track.rtk_fix,
            )
        )
    if not values:
        return [[] for _ in range(21)]
    return [list(column) for column in zip(*values, strict=True)]


def history_columns(states: Sequence[MowerState]) -> list[list[Any]]:
    """The 12 arrays of ``INSERT_HISTORY``."""
    return [
        [s.mower_id for s in states],
        [s.observed_at for s in states],
        [s.account_id for s in states],
        [s.activity for s in states],
        [s.battery for s in states],
        [s.charging for s in states],
        [s.rtk_fix for s in states],
        [s.rtk_source for s in states],
        [s.connection for s in states],
        [s.blade_height_mm for s in states],
        [s.speed_mps for s in states],
        [s.error_code for s in states],
    ]


def position_columns(states: Sequence[MowerState]) -> list[list[Any]]:
    """The 7 arrays of ``INSERT_POSITIONS`` (states with a position only)."""
    with_position = [(s, s.position) for s in states if s.position is not None]
    return [
        [s.mower_id for s, _ in with_position],
        [s.observed_at for s, _ in with_position],
        [s.account_id for s, _ in with_position],
        [p.lat for _, p in with_position],
        [p.lon for _, p in with_position],
        [p.heading_deg for _, p in with_position],
        [s.rtk_fix for s, _ in with_position],
    ]
