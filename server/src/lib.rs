//! The banlieue-console server: configuration, HTTP wiring, sessions and start-up.
//!
//! [`routes::router`] builds the whole HTTP surface; `main` and the integration tests both
//! call it.

mod account;
mod admin;
mod api;
pub mod assets;
mod claims;
pub mod config;
#[cfg(feature = "dev-cluster")]
pub mod dev_cluster;
mod form;
mod handlers;
mod middleware;
mod oidc;
pub mod operator;
mod pages;
mod pools;
mod roles;
pub mod routes;
mod session;
pub mod startup;
pub mod tls;
mod use_cases;

pub use handlers::READINESS_TIMEOUT;
pub use routes::{AppState, metrics_router, router};
