//! Acting in the cluster as a person (SPEC §5): clients that send Kubernetes "User
//! impersonation" headers from the console's own credentials, so RBAC and admission
//! decide what the person may do, and SelfSubjectAccessReviews asked as them.
//!
//! The console's own rights ([`Impersonation::console_client`]) are for the controllers
//! and for keeping the lists of groups and users it may impersonate
//! ([`crate::impersonable`]), never for a request made on a person's behalf.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::PostParams;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};

use crate::Error;

/// The prefix the API server puts on the user names and groups of the console's issuer
/// (the `claimMappings` of SPEC §4), which impersonation reproduces.
pub const CONSOLE_PREFIX: &str = "console:";

/// The start of the prefix the API server puts on a tenant's user names,
/// `oidc:<tenant>:` (SPEC §7), and the issuer prefix the claim-subject policy gives every
/// tenant's issuer (their claims' subject ids being `<tenant>:<sub>`).
pub const TENANT_PREFIX: &str = "oidc:";

/// The group every authenticated Kubernetes user is in.
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";

/// How long an impersonating client (and its connection pool) is reused for one identity.
const CLIENT_TTL: Duration = Duration::from_secs(300);

/// How long a request made for a person (or by the console itself) may wait for the API
/// server's response headers,
/// connection and TLS handshake included ([`Impersonation::with_request_timeout`]): a
/// cluster that stalls makes the page say so instead of holding it for kube-rs' 30 s
/// connect and 295 s read timeouts. A watch's events stream after its headers, unbounded.
pub const PERSON_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A Kubernetes identity: the user name and groups a client impersonates.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KubernetesIdentity {
    /// `console:<name>`.
    pub user: String,
    /// `console:<role>` for each role, then `system:authenticated`.
    pub groups: Vec<String>,
}

impl KubernetesIdentity {
    /// The identity the API server gives a console token of `name` with `roles` (the
    /// issuer's `claimMappings`: both prefixed with [`CONSOLE_PREFIX`]).
    pub fn console<'a>(name: &str, roles: impl IntoIterator<Item = &'a str>) -> Self {
        let mut groups: Vec<String> = roles
            .into_iter()
            .map(|role| format!("{CONSOLE_PREFIX}{role}"))
            .collect();
        groups.push(AUTHENTICATED_GROUP.to_owned());
        Self {
            user: format!("{CONSOLE_PREFIX}{name}"),
            groups,
        }
    }
}

/// The console's connection to a cluster, handing out impersonating clients.
pub struct Impersonation {
    config: kube::Config,
    clients: Mutex<HashMap<KubernetesIdentity, (Instant, Client)>>,
    /// The groups the cluster lets the console impersonate, once known
    /// ([`Impersonation::follow_impersonable`]); `None`: not known, or any.
    impersonable: RwLock<Option<BTreeSet<String>>>,
    /// The users the cluster lets the console impersonate, as the console last wrote or
    /// saw them ([`Impersonation::update_impersonable_users`],
    /// [`Impersonation::follow_impersonable`]).
    users: RwLock<KnownUsers>,
    /// [`PERSON_REQUEST_TIMEOUT`], unless replaced.
    request_timeout: Duration,
    /// Woken whenever the watch sees [`crate::impersonable::USERS_ROLE`] change, whoever
    /// wrote it ([`Impersonation::users_list_changed`]).
    users_changed: tokio::sync::Notify,
}

/// The users the cluster lets the console impersonate, and when updating them last failed.
#[derive(Default)]
struct KnownUsers {
    /// `None`: any user (a rule without names).
    named: Option<BTreeSet<String>>,
    failed_at: Option<Instant>,
}

/// How long after a failed update of the users list a person missing from it is served
/// without trying again (a cluster without the chart, an API server that is down).
const USERS_RETRY: Duration = Duration::from_secs(5);

impl Impersonation {
    /// Access with the console's own credentials, `config`.
    pub fn new(config: kube::Config) -> Self {
        Self {
            config,
            clients: Mutex::new(HashMap::new()),
            impersonable: RwLock::new(None),
            users: RwLock::new(KnownUsers {
                named: Some(BTreeSet::new()),
                failed_at: None,
            }),
            users_changed: tokio::sync::Notify::new(),
            request_timeout: PERSON_REQUEST_TIMEOUT,
        }
    }

    /// Replaces [`PERSON_REQUEST_TIMEOUT`] for the clients made for people.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Reads the console's credentials: the kubeconfig file `path` when given (the
    /// server's `BANLIEUE_KUBECONFIG`), else the usual inference (`KUBECONFIG`,
    /// `~/.kube/config`, then the in-cluster ServiceAccount; kube-rs `Config::infer`).
    ///
    /// Errors: [`Error::Config`] naming the file, when it cannot be read or used, or when
    /// no configuration is found.
    pub async fn from_kubeconfig(path: Option<&std::path::Path>) -> Result<Self, Error> {
        let config = match path {
            Some(path) => {
                let file = kube::config::Kubeconfig::read_from(path)
                    .map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
                kube::Config::from_custom_kubeconfig(
                    file,
                    &kube::config::KubeConfigOptions::default(),
                )
                .await
                .map_err(|e| Error::Config(format!("{}: {e}", path.display())))?
            }
            None => kube::Config::infer()
                .await
                .map_err(|e| Error::Config(e.to_string()))?,
        };
        Ok(Self::new(config))
    }

    /// The API server URL.
    pub fn cluster_url(&self) -> String {
        self.config.cluster_url.to_string()
    }

    /// A client with the console's own rights: for the controllers and the lists of
    /// impersonable groups and users only. Its requests are bounded like a person's
    /// (the list update runs before acting for a person it lacks).
    ///
    /// Errors: the configuration cannot make a client (TLS settings).
    pub fn console_client(&self) -> Result<Client, Error> {
        self.bounded_client(self.config.clone())
    }

    /// A client of `config` whose requests wait at most the request timeout for their
    /// response headers.
    fn bounded_client(&self, config: kube::Config) -> Result<Client, Error> {
        Ok(kube::client::ClientBuilder::try_from(config)?
            .with_layer(&tower::timeout::TimeoutLayer::new(self.request_timeout))
            .build())
    }

    /// Whether the API server is ready for the console: its `GET /readyz`, sent with the
    /// console's own credentials (so a revoked token shows too), answers 200 within
    /// `timeout`. For the console's readiness probe: a slow cluster makes the replica
    /// unready instead of holding the probe.
    ///
    /// Errors: [`Error::Unready`] with the status, the transport error, or the timeout.
    pub async fn check_ready(&self, timeout: Duration) -> Result<(), Error> {
        let client = self.console_client()?;
        let request = http::Request::get("/readyz")
            .body(Vec::new())
            .map_err(|e| Error::Unready(e.to_string()))?;
        match tokio::time::timeout(timeout, client.request_text(request)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => Err(Error::Unready(error.to_string())),
            Err(_) => Err(Error::Unready(format!("no answer in {timeout:?}"))),
        }
    }

    /// A client acting as `identity` (`Impersonate-User`, `Impersonate-Group`), reused
    /// for [`CLIENT_TTL`] per identity, each request bounded by the request timeout
    /// ([`PERSON_REQUEST_TIMEOUT`]; its error is then `kube::Error::Service`). Once the
    /// groups the console may impersonate are known, a group outside them is left out
    /// ([`Impersonation::narrowed`]).
    ///
    /// Errors: the configuration cannot make a client (TLS settings).
    pub fn client_for(&self, identity: &KubernetesIdentity) -> Result<Client, Error> {
        let identity = &self.narrowed(identity);
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        clients.retain(|_, (at, _)| at.elapsed() < CLIENT_TTL);
        if let Some((_, client)) = clients.get(identity) {
            return Ok(client.clone());
        }
        let mut config = self.config.clone();
        config.auth_info.impersonate = Some(identity.user.clone());
        config.auth_info.impersonate_groups = Some(identity.groups.clone());
        let client = self.bounded_client(config)?;
        clients.insert(identity.clone(), (Instant::now(), client.clone()));
        Ok(client)
    }

    /// `identity` without the groups the cluster does not let the console impersonate
    /// (a role held in the console without a labelled ClusterRole: made by hand, or just
    /// deleted): the API server would refuse the whole request for one of them, and none
    /// names a role of the Roles page. Unchanged while those groups are not known.
    pub fn narrowed(&self, identity: &KubernetesIdentity) -> KubernetesIdentity {
        let impersonable = self.impersonable.read().unwrap_or_else(|p| p.into_inner());
        let Some(impersonable) = impersonable.as_ref() else {
            return identity.clone();
        };
        let (groups, left_out): (Vec<String>, Vec<String>) = identity
            .groups
            .iter()
            .cloned()
            .partition(|group| impersonable.contains(group));
        if !left_out.is_empty() {
            tracing::debug!(user = %identity.user, ?left_out, "groups the console may not impersonate are left out");
        }
        KubernetesIdentity {
            user: identity.user.clone(),
            groups,
        }
    }

    /// The groups the cluster lets the console impersonate, as it last saw them (`None`:
    /// not known yet). No request is made.
    pub fn impersonable_groups(&self) -> Option<BTreeSet<String>> {
        self.impersonable
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Records which groups the console may impersonate (`None`: not known).
    pub fn set_impersonable_groups(&self, groups: Option<BTreeSet<String>>) {
        *self.impersonable.write().unwrap_or_else(|p| p.into_inner()) = groups;
    }

    /// Brings the list of groups the console may impersonate up to date with the custom
    /// roles now in the cluster ([`crate::impersonable::reconcile`], with the console's
    /// own credentials), and narrows impersonation to it: the Roles page calls it after
    /// each change, so a new role's holders are impersonated with it at once.
    ///
    /// Errors: as [`crate::impersonable::reconcile`].
    pub async fn update_impersonable_groups(&self) -> Result<(), Error> {
        let groups = crate::impersonable::reconcile(&self.console_client()?).await?;
        self.set_impersonable_groups(Some(groups.into_iter().collect()));
        Ok(())
    }

    /// Makes the cluster let the console impersonate exactly the Kubernetes users `users`
    /// (its own users' `console:<name>` and its tenant people's `oidc:<tenant>:<sub>`, as
    /// its database lists them now; [`crate::impersonable::reconcile_users`] with the
    /// console's own credentials), and remembers the list, or the failure.
    ///
    /// Errors: as [`crate::impersonable::reconcile_users`].
    pub async fn update_impersonable_users(
        &self,
        users: impl IntoIterator<Item = String>,
    ) -> Result<(), Error> {
        let updated = match self.console_client() {
            Ok(client) => crate::impersonable::reconcile_users(&client, users).await,
            Err(error) => Err(error),
        };
        match updated {
            Ok(named) => self.set_impersonable_users(Some(named.into_iter().collect())),
            Err(error) => {
                self.users
                    .write()
                    .unwrap_or_else(|p| p.into_inner())
                    .failed_at = Some(Instant::now());
                return Err(error);
            }
        }
        Ok(())
    }

    /// Completes at the next change the watch sees to the list of users the console may
    /// impersonate (made, changed or deleted, whoever wrote it: a `helm rollback` or
    /// `upgrade` rendering an older list, another replica, a person with `kubectl`), or
    /// at once when one was seen since the last call. The server then writes the list its
    /// database gives again, instead of waiting for its next minute.
    pub async fn users_list_changed(&self) {
        self.users_changed.notified().await;
    }

    /// Records which users the cluster lets the console impersonate (`None`: any).
    fn set_impersonable_users(&self, named: Option<BTreeSet<String>>) {
        *self.users.write().unwrap_or_else(|p| p.into_inner()) = KnownUsers {
            named,
            failed_at: None,
        };
    }

    /// Whether the list of users should be updated before acting as `identity`: the list
    /// as the console last wrote or saw it lacks their user (a person made a moment ago
    /// from a shell or by another replica, or a list another replica wrote from a stale
    /// read), and no update failed in the last [`USERS_RETRY`].
    pub fn lacks_user(&self, identity: &KubernetesIdentity) -> bool {
        let users = self.users.read().unwrap_or_else(|p| p.into_inner());
        users
            .named
            .as_ref()
            .is_some_and(|named| !named.contains(&identity.user))
            && users.failed_at.is_none_or(|at| at.elapsed() >= USERS_RETRY)
    }

    /// Follows the ClusterRoles [`crate::impersonable::GROUPS_ROLE`] and
    /// [`crate::impersonable::USERS_ROLE`] (watches with the console's own credentials):
    /// impersonation is narrowed to the groups the first names (while it cannot be read,
    /// nothing is left out), and a person the second lacks, whoever last wrote it, makes
    /// the console update it before acting for them ([`Impersonation::lacks_user`]).
    /// Never returns: spawn it.
    pub async fn follow_impersonable(self: std::sync::Arc<Self>) {
        let client = match self.console_client() {
            Ok(client) => client,
            Err(error) => {
                tracing::warn!(%error, "cannot follow the groups and users the console may impersonate");
                return std::future::pending().await;
            }
        };
        let groups = follow_role(&client, crate::impersonable::GROUPS_ROLE, |role| {
            self.set_impersonable_groups(role.and_then(crate::impersonable::impersonable_in));
        });
        let users = follow_role(&client, crate::impersonable::USERS_ROLE, |role| {
            // Missing: nobody, so each person is tried (and the failure remembered).
            self.set_impersonable_users(role.map_or(
                Some(BTreeSet::new()),
                crate::impersonable::impersonable_users_in,
            ));
            self.users_changed.notify_one();
        });
        futures::future::join(groups, users).await;
        std::future::pending().await
    }
}

/// Watches the ClusterRole `name` with `client`, calling `seen` with it at each change,
/// and with `None` when it is missing or deleted. Returns only if the watch stream ends.
async fn follow_role(client: &Client, name: &str, seen: impl Fn(Option<&ClusterRole>)) {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events =
        std::pin::pin!(watcher(Api::<ClusterRole>::all(client.clone()), config).default_backoff());
    let mut listed = false;
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Init) => listed = false,
            Ok(watcher::Event::InitApply(role) | watcher::Event::Apply(role)) => {
                listed = true;
                seen(Some(&role));
            }
            Ok(watcher::Event::InitDone) if !listed => seen(None),
            Ok(watcher::Event::Delete(_)) => seen(None),
            Ok(watcher::Event::InitDone) => {}
            Err(error) => tracing::debug!(%error, role = name, "watching a ClusterRole"),
        }
    }
}

/// SelfSubjectAccessReview (authorization.k8s.io/v1), asked with `client` (so as the
/// person it impersonates): may they `verb` the `resource` of the `banlieue.io` group, in
/// `namespace` or in every namespace (`None`)?
///
/// Errors: the review could not be created (transport, or the API server's refusal).
pub async fn may(
    client: &Client,
    resource: &str,
    verb: &str,
    namespace: Option<&str>,
) -> Result<bool, kube::Error> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: Some(crate::crd::GROUP.into()),
                resource: Some(resource.into()),
                verb: Some(verb.into()),
                namespace: namespace.map(Into::into),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let answer = Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_the_console_may_not_impersonate_are_left_out() {
        let access = Impersonation::new(kube::Config::new("https://127.0.0.1:1".parse().unwrap()));
        let identity = KubernetesIdentity::console("alice", ["developer", "gone"]);
        assert_eq!(
            access.narrowed(&identity),
            identity,
            "nothing known: unchanged"
        );
        access.set_impersonable_groups(Some(
            ["system:authenticated", "console:developer"]
                .map(str::to_owned)
                .into(),
        ));
        let narrowed = access.narrowed(&identity);
        assert_eq!(narrowed.user, "console:alice");
        assert_eq!(
            narrowed.groups,
            ["console:developer", "system:authenticated"]
        );
    }

    #[test]
    fn a_console_identity_is_prefixed_and_authenticated() {
        let identity = KubernetesIdentity::console("alice", ["developer", "operator"]);
        assert_eq!(identity.user, "console:alice");
        assert_eq!(
            identity.groups,
            [
                "console:developer",
                "console:operator",
                "system:authenticated"
            ]
        );
    }
}
