-- Fleet: the mower registry, its event outbox and the command log.

CREATE TABLE fleet_mowers (
    mower_id           uuid        PRIMARY KEY,
    account_id         uuid        NOT NULL,
    name               text        NOT NULL,
    connection_kind    text        NOT NULL,
    connection_options jsonb       NOT NULL DEFAULT '{}'::jsonb,
    version            integer     NOT NULL DEFAULT 1,  -- optimistic concurrency of PATCH
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL
);
CREATE INDEX fleet_mowers_account ON fleet_mowers (account_id);

-- Events written in the same transaction as the registry change; the relay publishes them
-- in seq order and stamps published_at. A row is the proof the event is owed.
CREATE TABLE fleet_outbox (
    seq          bigserial   PRIMARY KEY,
    event_id     uuid        NOT NULL UNIQUE,  -- also the Nats-Msg-Id
    subject      text        NOT NULL,
    body         bytea       NOT NULL,
    created_at   timestamptz NOT NULL,
    published_at timestamptz
);
CREATE INDEX fleet_outbox_pending ON fleet_outbox (seq) WHERE published_at IS NULL;

-- Commands Fleet issued and the statuses the gateway reported, recorded from the COMMANDS
-- stream by a durable consumer shared by all replicas.
CREATE TABLE fleet_commands (
    command_id  uuid        PRIMARY KEY,
    mower_id    uuid        NOT NULL,
    account_id  uuid        NOT NULL,
    kind        text        NOT NULL,
    issued_by   text        NOT NULL,
    issued_at   timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
);

CREATE TABLE fleet_command_statuses (
    command_id  uuid        NOT NULL,
    status      text        NOT NULL,
    mower_id    uuid        NOT NULL,
    at          timestamptz NOT NULL,
    reason      text,
    PRIMARY KEY (command_id, status)
);
