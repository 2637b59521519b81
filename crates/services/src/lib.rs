//! The console's use cases, one layer under every page and API (SPEC §5–§6): claims,
//! pools, roles, access ("What can I do?") and the live views, each taking a
//! [`Principal`] and a typed command and returning a typed view from
//! [`banlieue_domain::views`] or a [`ServiceError`].
//!
//! Every call to Kubernetes is made as the principal (impersonation,
//! [`cluster::Impersonation`]), so RBAC and the admission policies decide — but two: after
//! a role changes, the console updates the groups it may impersonate, and before acting
//! for a person its last list of users lacked, the users ([`Console::update_impersonable_users`]),
//! with its own credentials ([`cluster::impersonable`]); every action,
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
use tenants::TenantIdentity;

pub use claims::{ClaimScope, CreateClaim};
pub use error::{Decider, ServiceError};
pub use pools::{NAVIGATION_TIMEOUT, SavePool};
pub use principal::{Authenticator, IdentitySource, Principal};
pub use roles::{CUSTOM_ROLE_RESOURCES, CUSTOM_ROLE_VERBS, SaveRole};

/// How long after the console last acted for a tenant's person it may still impersonate
/// them: their next request after that notes them again first. Their sightings are not
/// written on every request, only when the list lacks them.
pub const TENANT_PEOPLE_KEPT: time::Duration = time::Duration::days(30);

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
    /// One update of the users the console may impersonate at a time, for the people its
    /// last list lacked.
    updating_users: tokio::sync::Mutex<()>,
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
            updating_users: tokio::sync::Mutex::new(()),
        }
    }

    /// Whether a cluster is configured.
    pub fn has_cluster(&self) -> bool {
        self.cluster.is_some()
    }

    /// Whether the console's cluster answers its readiness check within `timeout`
    /// ([`Impersonation::check_ready`]); `Ok` when no cluster is configured.
    ///
    /// Errors: [`cluster::Error::Unready`], or a client that cannot be made.
    pub async fn check_cluster_ready(
        &self,
        timeout: std::time::Duration,
    ) -> Result<(), cluster::Error> {
        match &self.cluster {
            Some(cluster) => cluster.check_ready(timeout).await,
            None => Ok(()),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// A client acting as `who`. When the console's last list of the users it may
    /// impersonate lacks them (made a moment ago: from a shell, by another replica), the
    /// list is brought up to date first, so they are acted for at once.
    ///
    /// Errors: [`ServiceError::NoCluster`]; [`ServiceError::Unavailable`] when no client
    /// can be made from the console's credentials.
    async fn client(&self, who: &Principal) -> Result<kube::Client> {
        let cluster = self.cluster.as_ref().ok_or(ServiceError::NoCluster)?;
        let identity = who.kubernetes_identity();
        if cluster.lacks_user(&identity) {
            let _one = self.updating_users.lock().await;
            // Another request may have brought them in meanwhile.
            if cluster.lacks_user(&identity) {
                if let IdentitySource::Tenant(person) = who.source() {
                    self.note_tenant_person(person).await?;
                }
                self.update_impersonable_users().await;
            }
        }
        cluster
            .client_for(&identity)
            .map_err(ServiceError::unavailable)
    }

    /// At once, every minute and whenever the list changed in the cluster
    /// ([`Impersonation::users_list_changed`]: a `helm rollback` renders its revision's
    /// list, someone edits it): [`Console::update_impersonable_users`]. Every replica
    /// reads the same table, so they agree; the console's own write wakes it once more, to
    /// find nothing to change. Until `stop` completes; at once without a cluster.
    pub async fn keep_impersonable_users(&self, stop: impl std::future::Future<Output = ()>) {
        let Some(cluster) = &self.cluster else {
            return;
        };
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(60));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut stop = std::pin::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => return,
                _ = tick.tick() => {}
                () = cluster.users_list_changed() => {}
            }
            self.update_impersonable_users().await;
        }
    }

    /// Makes the cluster let the console impersonate exactly the people now in its
    /// database ([`cluster::impersonable::reconcile_users`]): its users (`console:<name>`
    /// each) and the tenant people it acted for in the last [`TENANT_PEOPLE_KEPT`]
    /// (`oidc:<tenant>:<sub>` each). The server runs it through
    /// [`Console::keep_impersonable_users`], and after it makes or deletes a user. A
    /// failure is logged (the next run repairs it); without a cluster, nothing happens.
    pub async fn update_impersonable_users(&self) {
        let Some(cluster) = &self.cluster else {
            return;
        };
        let updated = match self.impersonable_users().await {
            Ok(users) => cluster
                .update_impersonable_users(users)
                .await
                .map_err(|e| e.to_string()),
            Err(error) => Err(error.to_string()),
        };
        if let Err(error) = updated {
            tracing::warn!(%error, "cannot update the users the console impersonates; retrying later");
        }
    }

    /// The Kubernetes users of [`Console::update_impersonable_users`].
    async fn impersonable_users(&self) -> Result<Vec<String>, banlieue_store::StoreError> {
        let store = self.accounts.store();
        let mut users = cluster::impersonable::users_for(store.user_names().await?);
        let since = time::OffsetDateTime::now_utc() - TENANT_PEOPLE_KEPT;
        users.extend(
            store
                .tenant_people_seen_since(since)
                .await?
                .into_iter()
                .map(|noted| {
                    let person = noted.person;
                    format!(
                        "{}{}",
                        TenantIdentity::prefix(&person.tenant),
                        person.subject
                    )
                }),
        );
        Ok(users)
    }

    /// Notes a tenant's person in the database as seen now, before the console is let
    /// impersonate them ([`Console::impersonable_users`] lists them from there, so every
    /// replica writes the same list).
    ///
    /// Errors: [`ServiceError::Unavailable`] when the database cannot be written.
    async fn note_tenant_person(&self, person: &TenantIdentity) -> Result<()> {
        let noted = banlieue_store::TenantPerson {
            tenant: person.tenant.clone(),
            subject: person.subject.clone(),
            username: person.username.clone(),
            display_name: person.name.clone(),
            email: person.email.clone(),
        };
        self.accounts
            .store()
            .note_tenant_person(&noted, time::OffsetDateTime::now_utc())
            .await
            .map_err(ServiceError::unavailable)
    }
}
