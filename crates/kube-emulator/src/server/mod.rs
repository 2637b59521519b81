//! The HTTP front: request parsing (as the API server's `RequestInfo` resolver does),
//! authentication, impersonation, RBAC, and dispatch to the store.
//!
//! Every request enters at [`handle`] ([`dispatch`]); object requests go to the
//! operations of [`crate::api`], lists to [`list`], watches to [`watch`], access reviews
//! to [`review`], and discovery, `/version` and OpenAPI to [`discovery`]. Errors are
//! `metav1.Status` responses ([`crate::status`]).

mod discovery;
mod dispatch;
mod impersonate;
mod list;
mod request;
mod review;
mod state;
mod watch;

pub(crate) use dispatch::handle;
pub(crate) use state::AppState;
