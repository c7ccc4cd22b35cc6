-- Telemetry read models (ADR 0017). Plain tables now; TimescaleDB hypertables later.

-- One row per mower: the newest state, guarded by observed_at, plus the fingerprint
-- memory (last history time, state fingerprint, last track point) the actor restarts from.
CREATE TABLE mower_latest (
    mower_id        uuid             PRIMARY KEY,
    account_id      uuid             NOT NULL,
    observed_at     timestamptz      NOT NULL,
    activity        text             NOT NULL,
    battery         smallint         NOT NULL,
    charging        boolean          NOT NULL,
    rtk_fix         text             NOT NULL,
    rtk_source      text,
    connection      text,
    blade_height_mm smallint,
    speed_mps       double precision,
    error_code      text,
    lat             double precision,
    lon             double precision,
    heading_deg     double precision,
    raw             jsonb            NOT NULL DEFAULT '{}'::jsonb,
    history_at      timestamptz,
    state_fp        bigint           NOT NULL,
    track_lat       double precision,
    track_lon       double precision,
    track_fix       text,
    updated_at      timestamptz      NOT NULL DEFAULT now()
) WITH (fillfactor = 50);
-- Every batch rewrites each mowing mower's row. No indexed column changes, so with free
-- room on the page (fillfactor 50) PostgreSQL updates in place (HOT): no index entries
-- per update and far less for autovacuum to clean up.
CREATE INDEX mower_latest_account ON mower_latest (account_id, mower_id);

-- Changes of state (and one unchanged row per heartbeat interval); append-only.
-- The primary key (mower_id, observed_at) is the ADR's (mower_id, observed_at desc) index
-- as well: a btree is scanned backwards as cheaply as forwards, so a second index on the
-- same columns would only double the write cost of every row.
CREATE TABLE mower_history (
    mower_id        uuid             NOT NULL,
    observed_at     timestamptz      NOT NULL,
    account_id      uuid             NOT NULL,
    activity        text             NOT NULL,
    battery         smallint         NOT NULL,
    charging        boolean          NOT NULL,
    rtk_fix         text             NOT NULL,
    rtk_source      text,
    connection      text,
    blade_height_mm smallint,
    speed_mps       double precision,
    error_code      text,
    PRIMARY KEY (mower_id, observed_at)
);
CREATE INDEX mower_history_account_time ON mower_history (account_id, observed_at DESC);
CREATE INDEX mower_history_time_brin ON mower_history USING brin (observed_at);

-- The position track; append-only. As above, the primary key serves the descending order.
CREATE TABLE mower_positions (
    mower_id        uuid             NOT NULL,
    observed_at     timestamptz      NOT NULL,
    account_id      uuid             NOT NULL,
    lat             double precision NOT NULL,
    lon             double precision NOT NULL,
    heading_deg     double precision,
    rtk_fix         text             NOT NULL,
    PRIMARY KEY (mower_id, observed_at)
);
CREATE INDEX mower_positions_account_time ON mower_positions (account_id, observed_at DESC);
CREATE INDEX mower_positions_time_brin ON mower_positions USING brin (observed_at);

-- One row per command status transition; the account comes from mower_directory.
CREATE TABLE command_timeline (
    command_id      uuid             NOT NULL,
    status          text             NOT NULL,
    mower_id        uuid             NOT NULL,
    account_id      uuid             NOT NULL,
    at              timestamptz      NOT NULL,
    reason          text,
    PRIMARY KEY (command_id, status)
);
CREATE INDEX command_timeline_mower_time ON command_timeline (mower_id, at DESC);
CREATE INDEX command_timeline_account_time ON command_timeline (account_id, at DESC);
CREATE INDEX command_timeline_time_brin ON command_timeline USING brin (at);

-- Which account a mower belongs to, from Fleet's events (and the start-up seed).
-- event_at is the occurred_at of the last event applied (NULL: seeded only); a removed
-- mower keeps a tombstone (removed_at) so a late seed cannot bring it back.
CREATE TABLE mower_directory (
    mower_id        uuid             PRIMARY KEY,
    account_id      uuid             NOT NULL,
    event_at        timestamptz,
    removed_at      timestamptz,
    updated_at      timestamptz      NOT NULL DEFAULT now()
);
CREATE INDEX mower_directory_account ON mower_directory (account_id);
