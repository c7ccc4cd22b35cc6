-- Retention (mowdeck/fleet/pruning.py): indexes for the batched deletes of published outbox
-- rows and of old command-log rows.

CREATE INDEX fleet_outbox_published ON fleet_outbox (published_at)
    WHERE published_at IS NOT NULL;
CREATE INDEX fleet_commands_issued ON fleet_commands (issued_at);
CREATE INDEX fleet_command_statuses_at ON fleet_command_statuses (at);

-- Since 0002, fleet_commands is written by the replica that issues a command, in batches,
-- before it publishes; fleet_command_statuses is still recorded from the COMMANDS stream.
