-- One row per signed-in browser session, so people can list and revoke their sessions.
-- The handle is a random value kept inside the tower-sessions record; deleting the row
-- ends the session on its next request.
CREATE TABLE user_sessions (
    handle TEXT PRIMARY KEY,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_ms BIGINT NOT NULL,
    last_seen_ms BIGINT NOT NULL,
    source_ip TEXT NOT NULL,
    user_agent TEXT NOT NULL
);
CREATE INDEX user_sessions_by_user ON user_sessions (user_id);

CREATE INDEX audit_events_by_actor ON audit_events (actor);
CREATE INDEX audit_events_by_target ON audit_events (target);
