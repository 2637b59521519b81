//! The console's own state in SQL: users, credentials, audit events, browser sessions, the
//! failed-sign-in back-off and the OIDC issuer's keys, codes and refresh tokens.
//!
//! One set of queries serves SQLite (the embedded default) and PostgreSQL (for more than
//! one replica) through sqlx's `Any` driver; only the migrations differ per backend.
//! Queries use `$N` placeholders, which both backends accept. Instants are stored as
//! BIGINT milliseconds since the Unix epoch and flags as BIGINT 0/1 (the `Any` driver
//! decodes no SQLite booleans).

mod audit;
mod database;
mod oidc;
mod sessions;
mod sign_in_backoff;
mod tenant_people;
mod user_sessions;
mod users;

pub use audit::{AuditEvent, AuditPage, AuditQuery};
pub use database::{Backend, DatabaseCheck, SealedSigningKey, Store, StoreError, sqlite_file};
pub use oidc::{
    AuthorizationCodeRecord, CodeRedemption, RefreshFamilyRecord, RefreshTokenRecord,
    SigningKeyRecord, StoredCode,
};
pub use sessions::SessionBackend;
pub use sign_in_backoff::{BackoffRule, BackoffState, SignInClaim, SignInKeys};
pub use tenant_people::{NotedTenantPerson, TenantPerson};
pub use user_sessions::UserSession;
pub use users::{NewUser, UserPage, UserRecord, UserUpdate};
