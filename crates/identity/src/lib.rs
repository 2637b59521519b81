//! Who people are and how they prove it: password hashing, sign-in with throttling,
//! password changes, the first admin, whether a browser session is still valid, and the
//! OIDC issuer that turns a console identity into Kubernetes tokens ([`oidc`]).
//!
//! No HTTP types here: the server crate maps these results to responses.

mod accounts;
mod admin;
mod hasher;
pub mod metrics;
pub mod oidc;
mod throttle;

pub use accounts::{
    Accounts, ChangePasswordError, IdentityError, SESSION_LIFETIME, SessionGrant, SignInAttempt,
    SignInError, USER_CACHE_TTL, generate_password,
};
pub use admin::{
    AUDIT_PER_PAGE, Actor, AdminError, MAX_PROFILE_FIELD, PasswordChoice, USERS_PER_PAGE,
    UserProfile,
};
pub use hasher::{HashError, HashLane, PasswordHasher};
pub use metrics::IdentityMetrics;
pub use throttle::{
    Attempt, MAX_ENTRIES as THROTTLE_MAX_ENTRIES, SignInThrottle, THROTTLED_AUDIT_WINDOW,
    ThrottlePolicy, Throttled,
};
