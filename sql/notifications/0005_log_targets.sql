-- Targets of the log channel were stored with the channel `ntfy` (a fault of the
-- PostgreSQL adapter, fixed in the same release): their document says what they are.
UPDATE notification_targets SET channel = 'log' WHERE target::jsonb ->> 'channel' = 'log';
