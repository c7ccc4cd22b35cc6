-- The command audit trail, and the open commands a final status is still owed for.
--
-- fleet_commands and fleet_command_statuses are the 7-day working set. The audit trail
-- keeps every command and every status it reached for MOWDECK_FLEET_AUDIT_RETENTION_DAYS
-- (400), in insert-only tables written in the same statement as the working set. Rows
-- are never changed: a later status is one more row.

CREATE TABLE fleet_audit_commands (
    command_id  uuid        PRIMARY KEY,
    account_id  uuid        NOT NULL,
    mower_id    uuid        NOT NULL,
    kind        text        NOT NULL,
    command     jsonb,  -- the command as issued (kind and parameters); NULL before 0004
    issued_by   text        NOT NULL,
    issued_at   timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
);
-- GET /v1/audit: an account's commands, newest first (keyset pages on issued_at, id).
CREATE INDEX fleet_audit_commands_account
    ON fleet_audit_commands (account_id, issued_at DESC, command_id DESC);
CREATE INDEX fleet_audit_commands_mower
    ON fleet_audit_commands (account_id, mower_id, issued_at DESC, command_id DESC);
-- Every emergency stop of an account, in one index range.
CREATE INDEX fleet_audit_emergency_stops
    ON fleet_audit_commands (account_id, issued_at DESC, command_id DESC)
    WHERE kind = 'emergency_stop';
CREATE INDEX fleet_audit_commands_issued ON fleet_audit_commands (issued_at);

CREATE TABLE fleet_audit_statuses (
    command_id  uuid        NOT NULL,
    status      text        NOT NULL,
    -- 'gateway': a result from the bus; 'fleet': Fleet gave up waiting for one.
    source      text        NOT NULL,
    at          timestamptz NOT NULL,
    reason      text,
    PRIMARY KEY (command_id, status, source)
);
CREATE INDEX fleet_audit_statuses_at ON fleet_audit_statuses (at);

-- Append-only: no UPDATE, DELETE or TRUNCATE, except the deletes of the retention round,
-- which sets mowdeck.audit_retention on its own connection. This guards against mistakes,
-- not against the table's owner (who can drop the trigger); Fleet's role owns it.
CREATE FUNCTION fleet_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('mowdeck.audit_retention', true) = 'on' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'the audit trail is append-only: % on % refused', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER fleet_audit_commands_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON fleet_audit_commands
    FOR EACH STATEMENT EXECUTE FUNCTION fleet_audit_append_only();
CREATE TRIGGER fleet_audit_statuses_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON fleet_audit_statuses
    FOR EACH STATEMENT EXECUTE FUNCTION fleet_audit_append_only();

-- Commands without a final status yet: written with the command, deleted with its final
-- status. The finalizer claims those past expires_at plus the grace and records them
-- failed (outcome unknown), so no command shows pending for ever.
CREATE TABLE fleet_open_commands (
    command_id  uuid        PRIMARY KEY,
    mower_id    uuid        NOT NULL,
    expires_at  timestamptz NOT NULL
);
CREATE INDEX fleet_open_commands_expiry ON fleet_open_commands (expires_at);

-- What the working set holds already goes into the trail, and its commands still
-- without a final status become open (the finalizer settles them on its first round).
INSERT INTO fleet_audit_commands
    (command_id, account_id, mower_id, kind, command, issued_by, issued_at, expires_at)
SELECT command_id, account_id, mower_id, kind, NULL, issued_by, issued_at, expires_at
FROM fleet_commands;
INSERT INTO fleet_audit_statuses (command_id, status, source, at, reason)
SELECT command_id, status, 'gateway', at, reason FROM fleet_command_statuses;
INSERT INTO fleet_open_commands (command_id, mower_id, expires_at)
SELECT c.command_id, c.mower_id, c.expires_at FROM fleet_commands c
WHERE NOT EXISTS (
    SELECT 1 FROM fleet_command_statuses s
    WHERE s.command_id = c.command_id
      AND s.status IN ('rejected', 'executed', 'expired', 'failed')
);
