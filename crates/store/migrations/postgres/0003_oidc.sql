-- The OIDC issuer (SPEC §4): signing keys, authorization codes and refresh-token families.
-- Codes and refresh tokens are stored as SHA-256 hashes only.

-- RSA signing keys. A key is published (in the JWKS) from creation, signs from
-- activates_ms, and is superseded when a newer key activates.
CREATE TABLE oidc_signing_keys (
    kid TEXT PRIMARY KEY,
    private_key_pkcs8 BYTEA NOT NULL,
    public_jwk TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    activates_ms BIGINT NOT NULL
);

CREATE TABLE oidc_authorization_codes (
    code_hash TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    redirect_uri TEXT NOT NULL,
    code_challenge TEXT NOT NULL,
    nonce TEXT,
    audience TEXT NOT NULL,
    scope TEXT NOT NULL,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    auth_time_ms BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL,
    consumed_ms BIGINT,
    -- The refresh family issued for this code, revoked when the code is replayed.
    family_id TEXT
);
CREATE INDEX oidc_authorization_codes_by_expiry ON oidc_authorization_codes (expires_ms);

-- A refresh-token family: every token rotated from one authorization.
CREATE TABLE oidc_refresh_families (
    id TEXT PRIMARY KEY,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    client_id TEXT NOT NULL,
    audience TEXT NOT NULL,
    scope TEXT NOT NULL,
    -- HMAC key from which each successor token is derived from its predecessor.
    secret BYTEA NOT NULL,
    auth_time_ms BIGINT NOT NULL,
    created_ms BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL,
    revoked_ms BIGINT
);
CREATE INDEX oidc_refresh_families_by_user ON oidc_refresh_families (user_id);
CREATE INDEX oidc_refresh_families_by_expiry ON oidc_refresh_families (expires_ms);

CREATE TABLE oidc_refresh_tokens (
    token_hash TEXT PRIMARY KEY,
    family_id TEXT NOT NULL REFERENCES oidc_refresh_families (id) ON DELETE CASCADE,
    issued_ms BIGINT NOT NULL,
    retired_ms BIGINT,
    successor_hash TEXT
);
CREATE INDEX oidc_refresh_tokens_by_family ON oidc_refresh_tokens (family_id);
