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
//!   the set is too old to trust);
//! - [`jwks`] caches the providers' signing keys, one cache per JWK Set endpoint;
//! - [`verify`] turns a tenant person's token into a [`TenantIdentity`], or says why not;
//! - [`metrics`] counts verifications and key fetches for `/metrics`.

pub mod document;
pub mod jwks;
pub mod metrics;
pub mod registry;
pub mod source;
mod token;
pub mod verify;

pub use document::{DocumentError, JwksLocation, RawDocument, Tenant, TenantSet, Warning};
pub use jwks::{JwksCache, JwksPolicy, KeyError};
pub use metrics::TenantMetrics;
pub use registry::{LoadError, Refresh, Snapshot, Stale, TenantRegistry};
pub use source::{ReadError, TenantSource};
pub use verify::{Refusal, TenantIdentity, TenantVerifier, VerifyError, unverified_issuer};
