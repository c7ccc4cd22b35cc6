-- A watch's last contact in columns of its own, and a version of the rest of it.
--
-- A heartbeat that changes nothing about a mower but the time of its newest state
-- (observed_at, device time) and of its contact (contact_at, the service's time) writes
-- only these two columns: no JSON is encoded, parsed or stored for it, and the indexed
-- silence_due_at does not move (a newer contact only makes the exact due time later, and
-- the stored one is a lower bound), so the update stays in place (HOT).
--
-- The columns are authoritative: the watch read back is the JSON document with these
-- two times put in. ``version`` counts the writes of the document; a replica whose actor
-- holds the watch at the stored version, with the stored observed_at, may write the
-- two columns without reading the document (docs/notifications.md, "Heartbeats").
ALTER TABLE notification_watches
    ADD COLUMN version     bigint NOT NULL DEFAULT 0,
    ADD COLUMN observed_at timestamptz,
    ADD COLUMN contact_at  timestamptz;
UPDATE notification_watches SET observed_at = (watch ->> 'observed_at')::timestamptz,
    contact_at = (watch ->> 'contact_at')::timestamptz;
ALTER TABLE notification_watches
    ALTER COLUMN observed_at SET NOT NULL,
    ALTER COLUMN contact_at SET NOT NULL;
