-- Token buckets of the command rate limits every Fleet replica shares (the account's;
-- mowdeck/kit/ratelimit, docs/fleet.md "Rate limits"): one row per key, written by one
-- INSERT ... ON CONFLICT DO UPDATE for each command, or for the commands of one account
-- that arrive together.
--
-- UNLOGGED: no write-ahead log flushed per write (on one busy key twice the takes a
-- second; docs/performance.md, "Rate limits: the shared store"), and a crash empties the
-- table, which leaves every bucket full: the right answer for buckets nobody can vouch
-- for. Nor is the table copied to standbys; after a failover the buckets start full
-- there too. Times are seconds since the epoch; a row whose bucket is full again
-- (full_at) is the same as no row, and each replica deletes those every minute.
-- No index on full_at: it changes with every write, and an index on it would stop the
-- updates from staying on their page (HOT). The table holds a row per account that
-- commanded in the last minute or two (an empty bucket refills in 40 s at the defaults),
-- which a scan reads in no time.
CREATE UNLOGGED TABLE fleet_rate_limits (
    key      text             PRIMARY KEY,
    tokens   double precision NOT NULL,
    at       double precision NOT NULL,
    full_at  double precision NOT NULL,
    granted  integer          NOT NULL  -- how many of the last write's takes passed
) WITH (fillfactor = 50);
