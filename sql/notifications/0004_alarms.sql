-- Alarms (docs/notifications.md, "Alarms"): a mower's condition from when a rule told it
-- until it ended, acknowledged and assigned by people.
--
-- At most one alarm is open (active or acknowledged) per mower and condition: a telling
-- of an open condition updates it (latest_at, count), its end clears it. Cleared alarms
-- are kept 90 days (MOWDECK_NOTIFICATIONS_ALARM_RETENTION_DAYS) and pruned with the
-- deliveries. Listings page newest first by (latest_at, id) within an account, open and
-- cleared ones on indexes of their own.
CREATE TABLE notification_alarms (
    id              uuid PRIMARY KEY,
    account_id      uuid        NOT NULL,
    mower_id        uuid        NOT NULL,
    condition       text        NOT NULL,
    kind            text        NOT NULL,
    severity        text        NOT NULL,
    state           text        NOT NULL CHECK (state IN ('active', 'acknowledged', 'cleared')),
    code            text,
    params          jsonb       NOT NULL DEFAULT '{}',
    first_at        timestamptz NOT NULL,
    latest_at       timestamptz NOT NULL,
    count           integer     NOT NULL DEFAULT 1,
    acknowledged_by text,
    acknowledged_at timestamptz,
    comment         text,
    assignee        text,
    assigned_by     text,
    assigned_at     timestamptz,
    cleared_at      timestamptz
);
CREATE UNIQUE INDEX notification_alarms_open
    ON notification_alarms (mower_id, condition) WHERE state <> 'cleared';
-- Listings of open alarms walk only open ones, listings of cleared ones only cleared
-- ones (an account's cleared alarms outnumber its open ones many times over).
CREATE INDEX notification_alarms_open_listing
    ON notification_alarms (account_id, latest_at DESC, id DESC) WHERE state <> 'cleared';
CREATE INDEX notification_alarms_cleared_listing
    ON notification_alarms (account_id, latest_at DESC, id DESC) WHERE state = 'cleared';
CREATE INDEX notification_alarms_cleared
    ON notification_alarms (cleared_at) WHERE state = 'cleared';
