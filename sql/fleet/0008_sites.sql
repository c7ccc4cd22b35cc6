-- Fleet: sites (a customer's property, a park, a pitch), their areas, and a mower's site.

CREATE TABLE fleet_sites (
    site_id     uuid        PRIMARY KEY,
    account_id  uuid        NOT NULL,
    name        text        NOT NULL,
    timezone    text        NOT NULL,  -- IANA name, checked by Fleet before it is stored
    lat         double precision NOT NULL,
    lon         double precision NOT NULL,
    version     integer     NOT NULL DEFAULT 1,  -- optimistic concurrency of PATCH
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
-- The pages of GET /v1/sites: an account's sites by name then id (keyset, no OFFSET).
CREATE INDEX fleet_sites_account_name ON fleet_sites (account_id, name, site_id);

-- Every area of a site as one validated GeoJSON FeatureCollection, versioned as a whole:
-- a PUT replaces all of them and raises the version by one.
CREATE TABLE fleet_site_areas (
    site_id     uuid        PRIMARY KEY REFERENCES fleet_sites (site_id) ON DELETE CASCADE,
    version     integer     NOT NULL,
    areas       jsonb       NOT NULL,
    updated_at  timestamptz NOT NULL
);

-- A mower belongs to at most one site; removing the site leaves its mowers without one.
ALTER TABLE fleet_mowers
    ADD COLUMN site_id uuid REFERENCES fleet_sites (site_id) ON DELETE SET NULL;
CREATE INDEX fleet_mowers_site ON fleet_mowers (site_id, mower_id) WHERE site_id IS NOT NULL;
