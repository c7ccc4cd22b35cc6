-- The pages of GET /v1/mowers: an account's mowers by name then id, read from a keyset
-- position (name, mower_id) with no OFFSET (mowdeck/kit/paging).
CREATE INDEX fleet_mowers_account_name ON fleet_mowers (account_id, name, mower_id);
