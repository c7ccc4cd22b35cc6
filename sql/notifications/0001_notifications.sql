-- Notifications (ADR 0022): preferences, per-mower watches, pending events and the inbox.
-- Channel targets and deliveries come with the delivery outbox, in a later migration.

-- One row per user who saved preferences; a user without a row has the defaults
-- (scope none: nobody is notified until they subscribe). ``kinds`` holds only what the
-- user chose, so a kind's default can change without rewriting rows.
CREATE TABLE notification_preferences (
    user_id              text        PRIMARY KEY,
    account_id           uuid        NOT NULL,
    scope                text        NOT NULL CHECK (scope IN ('none', 'all', 'selected')),
    mowers               uuid[]      NOT NULL DEFAULT '{}',
    kinds                jsonb       NOT NULL DEFAULT '{}'::jsonb,
    locale               text        NOT NULL DEFAULT 'en',
    timezone             text        NOT NULL DEFAULT 'UTC',
    quiet_start          text        CHECK (quiet_start ~ '^([01][0-9]|2[0-3]):[0-5][0-9]$'),
    quiet_end            text        CHECK (quiet_end ~ '^([01][0-9]|2[0-3]):[0-5][0-9]$'),
    quiet_allow_critical boolean     NOT NULL DEFAULT true,
    updated_at           timestamptz NOT NULL DEFAULT now(),
    CHECK ((quiet_start IS NULL) = (quiet_end IS NULL))
);
-- Every event loads the subscribers of its mower's account (only users who subscribed),
-- in user order.
CREATE INDEX notification_preferences_subscribers
    ON notification_preferences (account_id, user_id) WHERE scope <> 'none';

-- The rules' memory per mower (mowdeck.notifications.watch.MowerWatch as JSON). A state
-- batch locks its mowers' rows FOR UPDATE in mower_id order, in one transaction that also
-- writes the new watches and the batch's pending events.
--
-- silence_due_at is when the offline scan should look at the watch next (NULL: not before
-- a new state). It is kept a lower bound, never later than the rules' own answer: a state
-- batch only ever moves it earlier, and the scan, which re-checks every watch it takes,
-- moves it to the exact time. So a mower reporting every 10 s does not change the indexed
-- column on every batch, its row is updated in place (HOT, with the free room fillfactor
-- leaves), and the scan rewrites it about once per offline_after instead.
CREATE TABLE notification_watches (
    mower_id       uuid        PRIMARY KEY,
    account_id     uuid        NOT NULL,
    watch          jsonb       NOT NULL,
    silence_due_at timestamptz,
    updated_at     timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 70);
-- The scan: due rows in due order, taken FOR UPDATE SKIP LOCKED by every replica.
CREATE INDEX notification_watches_silence_due ON notification_watches (silence_due_at)
    WHERE silence_due_at IS NOT NULL;

-- Events the rules decided, waiting for their fan-out. Written in the rules' transaction
-- and deleted in the fan-out's (the one that writes the inbox items): a crash in between
-- delays the notification by a lease instead of losing it (an amendment to ADR 0022,
-- which accepted that loss; docs/notifications.md says why). The fan-out claims rows
-- FOR UPDATE SKIP LOCKED in a short transaction that counts the attempt and moves
-- claimed_until by a lease; a claim that is not completed comes back after the lease.
-- The table stays small (the fan-out keeps up), so the claim walks the primary key in
-- id order; no index on claimed_until, whose every claim would otherwise be an index
-- write rather than an update in place.
CREATE TABLE notification_pending (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    mower_id      uuid        NOT NULL,
    account_id    uuid        NOT NULL,
    kind          text        NOT NULL,
    severity      text        NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
    dedupe_key    text        NOT NULL,
    message_key   text        NOT NULL,
    params        jsonb       NOT NULL DEFAULT '{}'::jsonb,
    occurred_at   timestamptz NOT NULL,
    attempts      integer     NOT NULL DEFAULT 0,
    claimed_until timestamptz NOT NULL DEFAULT '-infinity',
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX notification_pending_mower ON notification_pending (mower_id);

-- What each user was told (or would have been, in quiet hours). One item per user and
-- occurrence (dedupe_key), so an event handled twice is stored once; the newest
-- notifications_inbox_limit items per user are kept.
CREATE TABLE notification_inbox (
    id                  uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id             text        NOT NULL,
    account_id          uuid        NOT NULL,
    mower_id            uuid        NOT NULL,
    kind                text        NOT NULL,
    severity            text        NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
    dedupe_key          text        NOT NULL,
    message_key         text        NOT NULL,
    params              jsonb       NOT NULL DEFAULT '{}'::jsonb,
    occurred_at         timestamptz NOT NULL,
    read                boolean     NOT NULL DEFAULT false,
    held_by_quiet_hours boolean     NOT NULL DEFAULT false,
    created_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, dedupe_key)
);
-- Newest first per user (scanned backwards), keyed like the page cursor (occurred_at, id);
-- the trim after each fan-out walks the same index.
CREATE INDEX notification_inbox_page ON notification_inbox (user_id, occurred_at, id);
CREATE INDEX notification_inbox_mower ON notification_inbox (mower_id);
