CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    display_name TEXT NOT NULL,
    email TEXT NOT NULL,
    tenant TEXT,
    disabled BIGINT NOT NULL CHECK (disabled IN (0, 1)),
    must_change_password BIGINT NOT NULL CHECK (must_change_password IN (0, 1)),
    not_before_ms BIGINT NOT NULL,
    version BIGINT NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL,
    last_sign_in_ms BIGINT
);

CREATE TABLE user_roles (
    user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    PRIMARY KEY (user_id, role)
);
CREATE INDEX user_roles_by_role ON user_roles (role);

CREATE TABLE password_credentials (
    user_id INTEGER PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    phc TEXT NOT NULL,
    updated_ms BIGINT NOT NULL
);

CREATE TABLE audit_events (
    id INTEGER PRIMARY KEY,
    at_ms BIGINT NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    source_ip TEXT NOT NULL,
    result TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX audit_events_by_time ON audit_events (at_ms);
