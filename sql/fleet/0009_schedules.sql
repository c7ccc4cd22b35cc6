-- Fleet: mowers' weekly schedules, the slots the scheduler decided, sites' restrictions,
-- and the scheduler's command outbox.

CREATE TABLE fleet_schedules (
    mower_id    uuid        PRIMARY KEY REFERENCES fleet_mowers (mower_id) ON DELETE CASCADE,
    account_id  uuid        NOT NULL,
    enabled     boolean     NOT NULL,
    tasks       jsonb       NOT NULL,
    timezone    text,                   -- a mower without a site: its own IANA zone
    hold        text,                   -- park_until_next_schedule | park_until_further_notice
    hold_until  timestamptz,
    -- The next thing the scheduler does: a slot's start or end (NULL: nothing).
    due_at      timestamptz,
    due_kind    text,
    slot_start  timestamptz,
    slot_end    timestamptz,
    slot_task   integer,
    slot_area   text,
    updated_at  timestamptz NOT NULL
);
-- The scheduler's claim: what is due, earliest first.
CREATE INDEX fleet_schedules_due ON fleet_schedules (due_at) WHERE due_at IS NOT NULL;

-- One row a slot: its primary key is what makes a slot start at most once.
CREATE TABLE fleet_schedule_slots (
    mower_id    uuid        NOT NULL REFERENCES fleet_mowers (mower_id) ON DELETE CASCADE,
    slot_start  timestamptz NOT NULL,
    slot_end    timestamptz NOT NULL,
    task        integer     NOT NULL,
    state       text        NOT NULL,  -- started, ended, held, skipped, parked, interrupted
    reason      text,
    start_command_id uuid,
    end_command_id   uuid,
    decided_at  timestamptz NOT NULL,
    PRIMARY KEY (mower_id, slot_start)
);

CREATE TABLE fleet_site_restrictions (
    restriction_id uuid       PRIMARY KEY,
    site_id     uuid        NOT NULL REFERENCES fleet_sites (site_id) ON DELETE CASCADE,
    reason      text        NOT NULL,
    until       timestamptz NOT NULL,
    created_at  timestamptz NOT NULL,
    created_by  text        NOT NULL
);
CREATE INDEX fleet_site_restrictions_site ON fleet_site_restrictions (site_id, until);

-- Commands the scheduler (or a park, a restriction) committed with its decision and owes
-- the bus; a row leaves once JetStream stored the command. A row older than a lease is
-- published again by any replica under the same command id (JetStream and the devices
-- answer a repeated id once).
-- A slot's start is claimed up to a lead ahead and published at ``publish_at``; a park
-- or restriction of the mower before then withdraws it (deletes the row, waiting for a
-- replica publishing it: it holds the row while it does).
CREATE TABLE fleet_schedule_outbox (
    command_id  uuid        PRIMARY KEY,
    mower_id    uuid        NOT NULL,
    body        bytea       NOT NULL,
    publish_at  timestamptz NOT NULL,
    owed_since  timestamptz NOT NULL  -- publish_at, or when a replica last took it
);
CREATE INDEX fleet_schedule_outbox_owed ON fleet_schedule_outbox (owed_since);
CREATE INDEX fleet_schedule_outbox_mower ON fleet_schedule_outbox (mower_id, publish_at);
