-- The failed-sign-in back-off, shared by every replica (banlieue_identity::SignInThrottle).
-- `key` is a throttled key: `s:` and 32 hex digits for a source address (IPv4, or an
-- IPv6 /64), `u:` and 32 hex digits for a digest of a typed user name. An attempt holds
-- its keys while `in_flight_until_ms` is ahead, so replicas admit one attempt per key
-- between them; rows idle for longer than the back-off remembers are pruned.
CREATE TABLE sign_in_backoff (
    key TEXT PRIMARY KEY,
    failures BIGINT NOT NULL,
    last_failure_ms BIGINT NOT NULL,
    blocked_until_ms BIGINT NOT NULL,
    in_flight_until_ms BIGINT NOT NULL
);

-- Where a user name last signed in successfully (a few addresses per name): from these
-- only the source's own back-off applies, not the name's.
CREATE TABLE sign_in_known_addresses (
    name_key TEXT NOT NULL,
    source_key TEXT NOT NULL,
    seen_ms BIGINT NOT NULL,
    PRIMARY KEY (name_key, source_key)
);
CREATE INDEX sign_in_known_addresses_by_seen ON sign_in_known_addresses (seen_ms);
