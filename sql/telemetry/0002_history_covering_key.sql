-- The history chart (GET .../history?step=) aggregates every row of a mower in a range;
-- with account, battery and charging in the primary key that scan is index-only: it reads
-- the key's leaf pages in order instead of one heap page per row (a mower's rows are
-- spread over the heap among every other mower's).
ALTER TABLE mower_history
    DROP CONSTRAINT mower_history_pkey,
    ADD PRIMARY KEY (mower_id, observed_at) INCLUDE (account_id, battery, charging);
