//! What a browser session stores, and the cookie it travels in.

use tower_sessions::cookie::SameSite;
use tower_sessions::{Expiry, SessionManagerLayer};

use banlieue_store::SessionBackend;

/// Session key of the [`banlieue_identity::SessionGrant`].
pub const AUTH_KEY: &str = "auth";

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
