//! The console in the cluster, as the signed-in person (SPEC §5): every client a handler
//! uses impersonates `console:<user>` with the groups `console:<role>` and
//! `system:authenticated` (Kubernetes "User impersonation"), from the console's own
//! credentials, so Kubernetes RBAC and admission decide. The console's own rights are
//! used only by its controllers.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use banlieue_store::UserRecord;

/// The prefix the API server puts on console user names and groups (the issuer's
/// `claimMappings`), which impersonation reproduces.
pub const CONSOLE_PREFIX: &str = "console:";

/// How long an impersonating client (and its connection pool) is reused for one person.
const CLIENT_TTL: Duration = Duration::from_secs(300);

/// A Kubernetes user name and its groups.
type Impersonation = (String, Vec<String>);

/// The console's connection to a cluster.
pub struct KubeAccess {
    config: kube::Config,
    clients: Mutex<HashMap<Impersonation, (Instant, kube::Client)>>,
}

impl KubeAccess {
    /// Access with the console's own credentials, `config`.
    pub fn new(config: kube::Config) -> Self {
        Self {
            config,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// Reads the console's credentials: the kubeconfig at `path`, else `KUBECONFIG` /
    /// `~/.kube/config`, else the in-cluster service account (kube-rs
    /// `Config::infer`). Errors name what was tried.
    pub async fn from_kubeconfig(path: Option<&std::path::Path>) -> anyhow::Result<Self> {
        let config = match path {
            Some(path) => {
                let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?
            }
            None => kube::Config::infer().await?,
        };
        Ok(Self::new(config))
    }

    /// The API server URL.
    pub fn cluster_url(&self) -> String {
        self.config.cluster_url.to_string()
    }

    /// A client with the console's own rights: for the controllers only, never for a
    /// request made on a person's behalf.
    pub fn console_client(&self) -> anyhow::Result<kube::Client> {
        Ok(kube::Client::try_from(self.config.clone())?)
    }

    /// A client acting as `user`: `Impersonate-User: console:<name>`,
    /// `Impersonate-Group: console:<role>` for each role, and `system:authenticated`.
    /// Reused for [`CLIENT_TTL`] per user and role set.
    pub fn as_user(&self, user: &UserRecord) -> anyhow::Result<kube::Client> {
        let (name, groups) = impersonation(user);
        let key = (name, groups);
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        clients.retain(|_, (at, _)| at.elapsed() < CLIENT_TTL);
        if let Some((_, client)) = clients.get(&key) {
            return Ok(client.clone());
        }
        let mut config = self.config.clone();
        config.auth_info.impersonate = Some(key.0.clone());
        config.auth_info.impersonate_groups = Some(key.1.clone());
        let client = kube::Client::try_from(config)?;
        clients.insert(key, (Instant::now(), client.clone()));
        Ok(client)
    }
}

/// The Kubernetes user name and groups of a console user.
pub fn impersonation(user: &UserRecord) -> Impersonation {
    let mut groups: Vec<String> = user
        .roles
        .iter()
        .map(|role| format!("{CONSOLE_PREFIX}{}", role.as_str()))
        .collect();
    groups.push("system:authenticated".to_owned());
    (format!("{CONSOLE_PREFIX}{}", user.name), groups)
}
