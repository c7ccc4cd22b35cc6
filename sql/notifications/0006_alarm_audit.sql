-- The alarms' audit trail (docs/notifications.md, "Alarms"): every change of every alarm,
-- who made it and when, written in the same transaction as the change itself (the
-- watches' transaction for raised, updated and cleared; the acknowledgement's or the
-- assignment's statement for those), so no change is missing from it.
--
-- Insert-only, like Fleet's command trail: a later change is one more row; rows older
-- than MOWDECK_NOTIFICATIONS_ALARM_AUDIT_RETENTION_DAYS (400) are deleted by the alarm
-- round, the only delete, which sets mowdeck.audit_retention on its own statement's
-- transaction. A removed mower's alarms go, their trail stays.
CREATE TABLE notification_alarm_audit (
    seq         bigserial   PRIMARY KEY,
    at          timestamptz NOT NULL,
    account_id  uuid        NOT NULL,
    mower_id    uuid        NOT NULL,
    alarm_id    uuid        NOT NULL,
    change      text        NOT NULL
        CHECK (change IN ('raised', 'updated', 'cleared', 'acknowledged', 'assigned',
                          'escalated')),
    kind        text        NOT NULL,
    condition   text        NOT NULL,
    severity    text        NOT NULL,
    code        text,
    by_user     text,  -- who acknowledged or assigned; NULL for what the rules decided
    comment     text,
    assignee    text
);
-- GET /v1/alarms/audit: an account's changes, newest first (keyset pages on seq).
CREATE INDEX notification_alarm_audit_account ON notification_alarm_audit (account_id, seq DESC);
CREATE INDEX notification_alarm_audit_mower
    ON notification_alarm_audit (account_id, mower_id, seq DESC);
CREATE INDEX notification_alarm_audit_at ON notification_alarm_audit (at);

CREATE FUNCTION notification_alarm_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('mowdeck.audit_retention', true) = 'on' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'the alarm audit trail is append-only: % on % refused', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER notification_alarm_audit_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON notification_alarm_audit
    FOR EACH STATEMENT EXECUTE FUNCTION notification_alarm_audit_append_only();

-- Escalation (MOWDECK_NOTIFICATIONS_ESCALATE_AFTER_SECONDS): a critical alarm nobody has
-- acknowledged in time is told to the account's admins, once; escalated_at marks it, set
-- in the transaction that writes the admins' pending event.
ALTER TABLE notification_alarms ADD COLUMN escalated_at timestamptz;
CREATE INDEX notification_alarms_unescalated ON notification_alarms (first_at)
    WHERE state = 'active' AND severity = 'critical' AND escalated_at IS NULL;
