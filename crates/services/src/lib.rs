//! The console's use cases, one layer under every page and API (SPEC §5–§6): claims,
//! pools, roles, access ("What can I do?") and the live views, each taking a
//! [`Principal`] and a typed command and returning a typed view from
//! [`banlieue_domain::views`] or a [`ServiceError`].
//!
//! Every call to Kubernetes is made as the principal (impersonation,
//! [`cluster::Impersonation`]), so RBAC and the admission policies decide — but one: after
//! a role changes, the console updates the groups it may impersonate with its own
//! credentials ([`cluster::impersonable`]); every action,
//! allowed or refused, is audited here and nowhere else ([`Console::audited`]). No HTTP
//! framework lives here: `server` maps requests to calls and [`ServiceError`]s to
//! responses.

mod access;
mod audit;
mod claims;
mod error;
pub mod live;
mod pools;
mod principal;
mod roles;

use std::sync::Arc;

use banlieue_identity::Accounts;
use cluster::Impersonation;

pub use claims::CreateClaim;
pub use error::{Decider, ServiceError};
pub use pools::SavePool;
pub use principal::{Authenticator, IdentitySource, Principal};
pub use roles::{CUSTOM_ROLE_RESOURCES, CUSTOM_ROLE_VERBS, SaveRole};

/// What a use case returns.
pub type Result<T, E = ServiceError> = std::result::Result<T, E>;

/// The console's settings the use cases read.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The console's issuer URL: the `spec.subject.issuer` of its own people's claims.
    pub issuer: String,
    /// Lifetimes a claim may ask for, in seconds (SPEC §6).
    pub claim_ttl_choices: Vec<u32>,
}

/// The use cases, over the console's accounts and (when configured) its cluster.
pub struct Console {
    accounts: Arc<Accounts>,
    cluster: Option<Arc<Impersonation>>,
    settings: Settings,
}

impl Console {
    /// The use cases over `accounts` and `cluster` (`None`: no cluster configured, every
    /// cluster use case answers [`ServiceError::NoCluster`] or an empty view).
    pub fn new(
        accounts: Arc<Accounts>,
        cluster: Option<Arc<Impersonation>>,
        settings: Settings,
    ) -> Self {
        Self {
            accounts,
            cluster,
            settings,
        }
    }

    /// Whether a cluster is configured.
    pub fn has_cluster(&self) -> bool {
        self.cluster.is_some()
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// A client acting as `who`.
    ///
    /// Errors: [`ServiceError::NoCluster`]; [`ServiceError::Unavailable`] when no client
    /// can be made from the console's credentials.
    fn client(&self, who: &Principal) -> Result<kube::Client> {
        let cluster = self.cluster.as_ref().ok_or(ServiceError::NoCluster)?;
        cluster
            .client_for(&who.kubernetes_identity())
            .map_err(ServiceError::unavailable)
    }
}
