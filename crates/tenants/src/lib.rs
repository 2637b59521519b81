//! The console's tenants (SPEC §7): organisations whose people sign in through their own
//! OpenID Connect provider, each described by a `ConsoleTenant` document
//! ([`cluster::crd::ConsoleTenant`]).
//!
//! - [`document`] reads a stream of documents and checks each into a [`Tenant`], naming
//!   the document and field of anything wrong;
//! - [`source`] is where the documents come from: the API server (the ConsoleTenants of
//!   the console's namespace) or a file;
//! - [`registry`] holds the current set: strict at start (any fault stops the console),
//!   lenient on refresh (a bad tenant is dropped, a failed read keeps the last set, until
//!   the set is too old to trust).

pub mod document;
pub mod registry;
pub mod source;

pub use document::{DocumentError, JwksLocation, RawDocument, Tenant, TenantSet, Warning};
pub use registry::{LoadError, Refresh, Snapshot, Stale, TenantRegistry};
pub use source::{ReadError, TenantSource};
