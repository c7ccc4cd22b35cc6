-- A device endpoint belongs to one registration (docs/fleet.md, "One registration per
-- device endpoint"): two mowers whose connections reach one device make the gateway open
-- two links to it, and each replaces the other at the device, for ever.
--
-- endpoint_key is the connection kind and the endpoint it names, written one way
-- (mowdeck/gateway/connections/endpoints.py, endpoint_key); NULL when the connection names
-- none. Fleet computes it in Python, the code the gateways key their links with: written
-- again in SQL the two would drift. So this migration adds the column empty and cannot
-- fail on rows that already share an endpoint; Fleet fills it in at start, earliest
-- registration (created_at, then mower_id) first. A later mower whose endpoint an earlier
-- one holds keeps no key, is marked unlinkable (left out of fleet.mowers.list, so no
-- gateway dials it) and logged at every start, until a change of its own stores a key or
-- its endpoint is free at a start.

ALTER TABLE fleet_mowers
    ADD COLUMN endpoint_key text,
    ADD COLUMN unlinkable   boolean NOT NULL DEFAULT false;

-- Replicas racing to register one endpoint: one insert wins, the other gets 23505 (409).
-- NULLs are distinct, so mowers without a key never clash.
CREATE UNIQUE INDEX fleet_mowers_endpoint_key ON fleet_mowers (endpoint_key);
