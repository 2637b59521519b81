-- The people of tenants (SPEC §7) the console has acted for in the cluster: the cluster
-- lets it impersonate `oidc:<tenant>:<subject>` only while a row here is recent
-- (services::Console keeps that list). `subject` is the token's `sub`; the other columns
-- are what its last token said, for the administration pages.
CREATE TABLE tenant_people (
    tenant TEXT NOT NULL,
    subject TEXT NOT NULL,
    username TEXT NOT NULL,
    display_name TEXT,
    email TEXT,
    first_seen_ms BIGINT NOT NULL,
    last_seen_ms BIGINT NOT NULL,
    PRIMARY KEY (tenant, subject)
);
CREATE INDEX tenant_people_by_last_seen ON tenant_people (last_seen_ms);
