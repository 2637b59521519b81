//! What a browser session stores, and the cookie it travels in.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use tower_sessions::cookie::SameSite;
use tower_sessions::{Expiry, SessionManagerLayer};

use banlieue_store::SessionBackend;

/// Session key of [`SessionAuth`].
pub const AUTH_KEY: &str = "auth";

/// Who signed in and when: the session is dead once the user's `not_before` passes
/// `auth_time_ms` (SPEC §3).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct SessionAuth {
    pub user_id: i64,
    /// Milliseconds since the Unix epoch.
    pub auth_time_ms: i64,
}

impl SessionAuth {
    pub fn new(user_id: i64, at: OffsetDateTime) -> Self {
        Self {
            user_id,
            auth_time_ms: i64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX),
        }
    }

    pub fn auth_time(&self) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp_nanos(i128::from(self.auth_time_ms) * 1_000_000)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH)
    }
}

/// The session cookie's name: `__Host-` prefixed over https, which pins it to this host
/// and path `/` with `Secure` (RFC 6265bis §4.1.3.2).
pub fn cookie_name(https: bool) -> &'static str {
    if https {
        "__Host-banlieue-session"
    } else {
        "banlieue-session"
    }
}

/// tower-sessions' layer: `HttpOnly`, `SameSite=Lax`, `Secure` over https, expiring after
/// 12 hours without a request.
pub fn layer(store: SessionBackend, https: bool) -> SessionManagerLayer<SessionBackend> {
    SessionManagerLayer::new(store)
        .with_name(cookie_name(https))
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_secure(https)
        .with_path("/")
        .with_expiry(Expiry::OnInactivity(time::Duration::hours(12)))
}
