//! banlieue's Kubernetes side (SPEC §6): the `banlieue.io/v1alpha1` custom resources, the
//! claim and pool controllers, the simulated provider (with its EK certificate authority),
//! the EK certificate checks a broker relies on, and [`run_controllers`], which runs
//! them under leader election.
//!
//! The rules the claim controller follows are pure functions in
//! [`banlieue_domain::claim`]; this crate does the I/O around them.

pub mod attestation;
pub mod chart;
pub mod claim;
mod convert;
pub mod crd;
pub mod ek_authority;
mod error;
pub mod impersonable;
pub mod impersonation;
pub mod member_index;
mod metrics;
pub mod pool;
pub mod provider;
mod runner;

pub use error::Error;
pub use impersonation::{CONSOLE_PREFIX, Impersonation, KubernetesIdentity, TENANT_PREFIX};
pub use metrics::Metrics;
pub use provider::SimulatedProviderConfig;
pub use runner::{ControllerConfig, check_crds, run_controllers, run_controllers_retrying};
