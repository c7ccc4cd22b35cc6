-- Notifications delivery (ADR 0022): channel targets and the delivery outbox.

-- What a user registered to be reached at. ``target`` is the validated document
-- (targets.Target as JSON; an ntfy access token is kept here and never returned).
-- ``endpoint`` is a Web Push subscription's endpoint: one browser, one owner, so it is
-- unique and a registration by another user moves it to them.
CREATE TABLE notification_targets (
    id         uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id    text        NOT NULL,
    channel    text        NOT NULL,
    target     jsonb       NOT NULL,
    endpoint   text        UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX notification_targets_user ON notification_targets (user_id, created_at, id);

-- One row per notification and target, written in the fan-out's transaction (the one
-- that writes the inbox items), plus one quiet-hours summary per target and quiet
-- window. The message is kept as key and parameters and rendered when it is sent, in
-- the recipient's locale and time zone of that moment.
--
-- state: 'due' until it is sent or given up ('sent', 'failed'); a gone target takes
-- its deliveries with it (ON DELETE CASCADE). A worker claims due rows whose
-- next_attempt_at has come FOR UPDATE SKIP LOCKED, counts the attempt and moves
-- next_attempt_at by the lease, in a short transaction of its own; the result then
-- sets the state or the next attempt. finished_at is set with a final state; such rows
-- are pruned after the retention.
CREATE TABLE notification_deliveries (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    target_id       uuid        NOT NULL REFERENCES notification_targets (id) ON DELETE CASCADE,
    user_id         text        NOT NULL,
    channel         text        NOT NULL,
    state           text        NOT NULL DEFAULT 'due' CHECK (state IN ('due', 'sent', 'failed')),
    kind            text        NOT NULL,
    mower_id        uuid,
    severity        text        NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
    dedupe_key      text        NOT NULL,
    message_key     text        NOT NULL,
    params          jsonb       NOT NULL DEFAULT '{}'::jsonb,
    occurred_at     timestamptz NOT NULL,
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text,
    finished_at     timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    -- A repeated event meets its earlier row; a summary row collects its quiet window.
    UNIQUE (target_id, dedupe_key)
);
-- The claim: due rows in due order. Only due rows are indexed, so a finished row leaves
-- the index and the claim's walk stays as short as the backlog.
CREATE INDEX notification_deliveries_due ON notification_deliveries (next_attempt_at, id)
    WHERE state = 'due';
-- Pruning of finished rows.
CREATE INDEX notification_deliveries_finished ON notification_deliveries (finished_at)
    WHERE finished_at IS NOT NULL;
CREATE INDEX notification_deliveries_user ON notification_deliveries (user_id);
CREATE INDEX notification_deliveries_mower ON notification_deliveries (mower_id);
