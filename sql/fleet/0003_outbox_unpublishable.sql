-- Outbox rows the bus can never take (larger than its max_payload, or refused by JetStream
-- for what they are) are set aside instead of holding back every row after them: the relay
-- stamps failed_at and the reason, and no longer claims them. Such a row is kept (pruning
-- deletes only published rows); clearing failed_at hands it back to the relay.

ALTER TABLE fleet_outbox
    ADD COLUMN failed_at timestamptz,
    ADD COLUMN error     text;

-- fleet_outbox_pending (seq) WHERE published_at IS NULL still serves the claim: the rows
-- set aside are few and filtered on the way.
