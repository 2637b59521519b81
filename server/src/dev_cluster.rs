//! The zero-setup demo cluster of `make run` (SPEC §10): the Kubernetes emulator in this
//! process, set up as the chart would set up a real cluster — the CRDs, the console's
//! roles, the controllers' RBAC, the claim admission policy trusting this console's
//! issuer — plus a `demo` namespace with one pool served by the simulated provider, and
//! the controllers running. Development only: `serve` starts it only when asked
//! (`--dev-cluster`), never because a kubeconfig is missing.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use banlieue_identity::oidc::ClusterAccess;
use cluster::chart;
use kube::api::Api;
use kube_emulator::auth::{UserInfo, parse_authentication_configuration};
use kube_emulator::{Emulator, EmulatorConfig};

use cluster::Impersonation;

/// The namespace of the demo pool.
pub const DEMO_NAMESPACE: &str = "demo";
/// The console's service account, as the emulator authenticates the console.
const CONSOLE_SERVICE_ACCOUNT: &str = "system:serviceaccount:banlieue-system:banlieue-console";

/// The running demo cluster.
pub struct DevCluster {
    emulator: Emulator,
    /// The console's credentials in it (its service account's token).
    pub access: Arc<Impersonation>,
    /// What downloaded kubeconfigs point at.
    pub cluster: ClusterAccess,
    /// The console's credentials as a kubeconfig (YAML), for another console process to
    /// act in this cluster as this one does (`BANLIEUE_KUBECONFIG`).
    pub console_kubeconfig: String,
}

impl DevCluster {
    /// Lets the claim-subject policy take the claims of the tenants' people too, as the
    /// chart's settings for tenants do: the console's issuer `issuer_url` and each of
    /// `tenant_issuers`, whose people are `oidc:` + `<tenant>:<sub>` there.
    ///
    /// Errors: the emulator refuses the policies.
    pub async fn admit_tenants<'a>(
        &self,
        issuer_url: &str,
        tenant_issuers: impl IntoIterator<Item = &'a str>,
    ) -> anyhow::Result<()> {
        let admin = client_for(&self.emulator.kubeconfig_yaml()).await?;
        chart::install(
            &admin,
            &chart::ClaimSubjectPolicy::with_tenants(issuer_url, tenant_issuers),
        )
        .await
        .context("cannot admit the tenants' claims in the dev cluster")
    }

    /// Starts the emulator on `listen` with its state under `dir` (kept across restarts),
    /// trusting `issuer_url`'s ID tokens, and applies the chart and the demo pool.
    pub async fn start(
        listen: std::net::SocketAddr,
        dir: &Path,
        issuer_url: &str,
    ) -> anyhow::Result<Self> {
        // The emulator keeps its signing keys and tokens here: for this user alone.
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
            .create(dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let authentication =
            parse_authentication_configuration(&authentication_configuration(issuer_url))
                .map_err(|e| anyhow::anyhow!("dev cluster authentication: {e}"))?;
        let emulator = Emulator::start(EmulatorConfig {
            listen,
            authentication: Some(authentication),
            allow_insecure_loopback_issuers: true,
            state_file: Some(dir.join("state.json")),
            identity_file: Some(dir.join("identity.json")),
            ..EmulatorConfig::default()
        })
        .await
        .with_context(|| format!("cannot start the dev cluster on {listen}"))?;
        let console_token = console_token(dir)?;
        emulator.add_token(
            &console_token,
            UserInfo {
                username: CONSOLE_SERVICE_ACCOUNT.into(),
                groups: vec![
                    "system:serviceaccounts".into(),
                    "system:authenticated".into(),
                ],
                ..UserInfo::default()
            },
        );
        let admin = client_for(&emulator.kubeconfig_yaml()).await?;
        apply_chart(&admin, issuer_url).await?;
        apply_demo_pool(&admin).await?;
        let console_kubeconfig = emulator.kubeconfig_for(&console_token);
        let console = kubeconfig_config(&console_kubeconfig).await?;
        let cluster = ClusterAccess {
            name: "banlieue-dev".into(),
            server: emulator.base_url(),
            certificate_authority_pem: emulator.ca_pem().map(str::to_owned),
        };
        tracing::info!(server = %emulator.base_url(), "dev cluster ready: namespace demo, pool sandbox");
        Ok(Self {
            emulator,
            access: Arc::new(Impersonation::new(console)),
            cluster,
            console_kubeconfig,
        })
    }

    pub async fn shutdown(self) {
        self.emulator.shutdown().await;
    }
}

/// The API server's `AuthenticationConfiguration` (apiserver.config.k8s.io/v1) that
/// trusts the console at `issuer_url`: audience `kubernetes`, `sub` and `groups` with the
/// `console:` prefix, no `system:` user names (README, "Kubernetes API server
/// configuration").
pub fn authentication_configuration(issuer_url: &str) -> String {
    format!(
        "apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: {issuer_url}
    audiences: [kubernetes]
  claimMappings:
    username:
      claim: sub
      prefix: 'console:'
    groups:
      claim: groups
      prefix: 'console:'
  userValidationRules:
  - expression: \"!user.username.startsWith('system:')\"
    message: 'user names with the system: prefix are reserved'
"
    )
}

/// The console's token in the dev cluster: random, kept in `dir` so a restart reuses it.
fn console_token(dir: &Path) -> anyhow::Result<String> {
    let path: PathBuf = dir.join("console-token");
    if let Ok(token) = std::fs::read_to_string(&path) {
        return Ok(token.trim().to_owned());
    }
    let token = crate::middleware::correlation_id() + &crate::middleware::correlation_id();
    write_private(&path, &token).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(token)
}

/// Writes `text` to a new file only its owner may read (mode 0600).
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(text.as_bytes())
}

async fn kubeconfig_config(yaml: &str) -> anyhow::Result<kube::Config> {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(yaml)?;
    Ok(kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?)
}

async fn client_for(yaml: &str) -> anyhow::Result<kube::Client> {
    Ok(kube::Client::try_from(kubeconfig_config(yaml).await?)?)
}

/// Installs the chart as `helm install -n banlieue-system` would, with this console's
/// issuer as the only allowed claim issuer (until [`DevCluster::admit_tenants`]).
async fn apply_chart(admin: &kube::Client, issuer_url: &str) -> anyhow::Result<()> {
    chart::install(admin, &chart::ClaimSubjectPolicy::only_issuer(issuer_url))
        .await
        .context("cannot install the chart in the dev cluster")
}

/// Creates the demo pool once; a restart keeps what people changed since.
async fn apply_demo_pool(admin: &kube::Client) -> anyhow::Result<()> {
    ensure_namespace(admin, DEMO_NAMESPACE).await?;
    let pools = Api::<cluster::crd::VirtualMachinePool>::namespaced(admin.clone(), DEMO_NAMESPACE);
    if pools.get_opt("sandbox").await?.is_some() {
        return Ok(());
    }
    apply_documents(
        admin,
        "apiVersion: banlieue.io/v1alpha1
kind: VirtualMachinePool
metadata:
  name: sandbox
  namespace: demo
spec:
  warmReplicas: 3
  maxReplicas: 10
  imageRevision: demo-1
  template:
    cpu: 2
    memory: 4Gi
    image: banlieue/sandbox:demo
  providerRef: simulated
",
    )
    .await
}

async fn ensure_namespace(admin: &kube::Client, name: &str) -> anyhow::Result<()> {
    apply_documents(
        admin,
        &format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n"),
    )
    .await
}

/// Server-side applies every document of `yaml`.
async fn apply_documents(client: &kube::Client, yaml: &str) -> anyhow::Result<()> {
    Ok(chart::apply(client, &chart::parse_documents(yaml)?).await?)
}
