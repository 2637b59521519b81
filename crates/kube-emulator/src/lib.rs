//! A Kubernetes API server emulator for development and tests (SPEC §10, issue 5).
//!
//! It serves enough of the Kubernetes REST API for `kubectl`, `kube-rs` and the console's
//! controllers: discovery, built-in kinds and CRDs (schema validation, `status`
//! subresource, printer columns), get/list/watch/create/update/patch/delete with
//! resourceVersion semantics, finalizers and garbage collection, `Status` errors, bearer
//! token and JWT authentication, impersonation, RBAC, and ValidatingAdmissionPolicy (CEL).
//!
//! It listens with TLS (a CA generated at start; see [`Emulator::ca_pem`]) or, if asked,
//! plain HTTP (kubectl then sends no credentials). It is never a production path.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! let emu = kube_emulator::Emulator::start(kube_emulator::EmulatorConfig::default()).await?;
//! println!("{}", emu.base_url());
//! std::fs::write("kubeconfig", emu.kubeconfig_yaml())?;
//! emu.shutdown().await;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

pub mod admission;
pub mod api;
pub mod apply;
pub mod auth;
pub mod feed;
pub mod protobuf;
pub mod rbac;
pub mod resources;
pub mod schema;
pub mod selector;
pub mod server;
pub mod status;
pub mod store;
pub mod table;
pub mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng;
use serde_json::{Value, json};
use tokio::sync::{Notify, oneshot};

pub use auth::{AuthenticationConfiguration, StaticToken, UserInfo};
use server::AppState;
use store::{Snapshot, Store};

/// Errors from starting the emulator.
#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    /// The listener could not bind.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Requested address.
        addr: SocketAddr,
        /// Cause.
        source: std::io::Error,
    },
    /// The snapshot file exists but cannot be read or parsed.
    #[error("cannot load state from {path}: {reason}")]
    State {
        /// Snapshot path.
        path: PathBuf,
        /// Cause.
        reason: String,
    },
    /// A JWT authenticator could not be built.
    #[error("invalid authentication configuration: {0}")]
    Authentication(String),
    /// TLS material could not be generated.
    #[error("TLS setup failed: {0}")]
    Tls(String),
}

/// How to run the emulator.
#[derive(Debug, Clone)]
pub struct EmulatorConfig {
    /// Listen address; port 0 picks a free port. Default `127.0.0.1:0`.
    pub listen: SocketAddr,
    /// The admin token (user `admin`, group `system:masters`); random when `None`.
    pub admin_token: Option<String>,
    /// Further static tokens.
    pub tokens: Vec<StaticToken>,
    /// JWT authenticators, validated at start as kube-apiserver validates its
    /// `--authentication-config` (see [`auth::validate_authentication_configuration`]).
    pub authentication: Option<AuthenticationConfiguration>,
    /// Emulator-only relaxation, off by default: accept JWT issuer (and discovery) URLs
    /// with the `http` scheme when their host is loopback (`127.0.0.0/8`, `::1`,
    /// `localhost`). The real kube-apiserver refuses every non-`https` issuer; test suites
    /// that run their OIDC issuer over plain HTTP on loopback turn this on. Non-loopback
    /// `http` issuers are refused either way.
    pub allow_insecure_loopback_issuers: bool,
    /// Snapshot file: loaded at start if present, written (atomically) after changes.
    pub state_file: Option<PathBuf>,
    /// How many changes watches can replay (older start points get `410 Expired`).
    pub watch_history: usize,
    /// Interval between watch bookmarks (when the client allows them).
    pub bookmark_interval: Duration,
    /// Interval of the garbage collector's periodic pass (it also runs after deletes).
    pub gc_interval: Duration,
    /// Serve HTTPS with a generated CA (default). kubectl needs it to send tokens.
    pub tls: bool,
    /// Where to keep the CA, server certificate and admin token across restarts (JSON,
    /// written with mode 0600 on first start), so a kubeconfig stays valid.
    pub identity_file: Option<PathBuf>,
}

impl Default for EmulatorConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin_token: None,
            tokens: Vec::new(),
            authentication: None,
            allow_insecure_loopback_issuers: false,
            state_file: None,
            watch_history: 100_000,
            bookmark_interval: Duration::from_secs(10),
            gc_interval: Duration::from_millis(500),
            tls: true,
            identity_file: None,
        }
    }
}

/// A running emulator. Dropping it does not stop the server; call [`Emulator::shutdown`].
pub struct Emulator {
    addr: SocketAddr,
    admin_token: String,
    state: Arc<AppState>,
    stop: Option<oneshot::Sender<()>>,
    feed: Arc<feed::Feed>,
    ca_pem: Option<String>,
    task: Option<tokio::task::JoinHandle<()>>,
    state_file: Option<PathBuf>,
}

fn random_token() -> String {
    let bytes: [u8; 24] = rand::thread_rng().r#gen();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn seed(store: &mut Store) {
    let ctx_user = UserInfo::new("system:apiserver", &["system:masters"]);
    let mut ctx = api::Ctx::new(&ctx_user);
    let mut create =
        |store: &mut Store, group: &str, version: &str, plural: &str, ns: &str, obj: Value| {
            if let Some(def) = store.registry.get(group, version, plural) {
                let name = obj["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                if store.get(group, plural, ns, &name).is_none()
                    && let Err(e) = api::create(store, &def, ns, obj, &mut ctx)
                {
                    tracing::warn!(error = %e, "seed object refused");
                }
            }
        };
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        create(
            store,
            "",
            "v1",
            "namespaces",
            "",
            json!({"metadata": {"name": ns}}),
        );
    }
    let rbac = "rbac.authorization.k8s.io";
    let roles = [
        (
            "cluster-admin",
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
        ),
        (
            "system:discovery",
            json!([{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/readyz", "/openapi", "/openapi/*", "/version", "/version/"], "verbs": ["get"]}]),
        ),
        (
            "system:basic-user",
            json!([
                {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
                {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}
            ]),
        ),
    ];
    for (name, rules) in roles {
        create(
            store,
            rbac,
            "v1",
            "clusterroles",
            "",
            json!({"metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}}, "rules": rules}),
        );
    }
    for (name, role, group) in [
        ("cluster-admin", "cluster-admin", "system:masters"),
        (
            "system:discovery",
            "system:discovery",
            "system:authenticated",
        ),
        (
            "system:basic-user",
            "system:basic-user",
            "system:authenticated",
        ),
    ] {
        create(
            store,
            rbac,
            "v1",
            "clusterrolebindings",
            "",
            json!({
                "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
                "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": role},
                "subjects": [{"apiGroup": rbac, "kind": "Group", "name": group}]
            }),
        );
    }
}

/// What the identity file holds.
#[derive(serde::Serialize, serde::Deserialize)]
struct Identity {
    admin_token: String,
    ca_pem: String,
    /// Base64 DER.
    cert_der: String,
    /// Base64 PKCS#8 DER.
    key_der: String,
}

impl Identity {
    fn certs(&self) -> Result<tls::Certs, EmulatorError> {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD;
        let cert = b64
            .decode(&self.cert_der)
            .map_err(|e| EmulatorError::Tls(e.to_string()))?;
        let key = b64
            .decode(&self.key_der)
            .map_err(|e| EmulatorError::Tls(e.to_string()))?;
        Ok(tls::Certs {
            ca_pem: self.ca_pem.clone(),
            cert_der: cert.into(),
            key_der: key,
        })
    }
}

fn load_or_create_identity(
    path: &PathBuf,
    admin_token: Option<&str>,
) -> Result<Identity, EmulatorError> {
    use base64::Engine;
    let state_err = |reason: String| EmulatorError::State {
        path: path.clone(),
        reason,
    };
    if path.exists() {
        let text = std::fs::read(path).map_err(|e| state_err(e.to_string()))?;
        let mut id: Identity =
            serde_json::from_slice(&text).map_err(|e| state_err(e.to_string()))?;
        if let Some(t) = admin_token {
            id.admin_token = t.to_string();
        }
        return Ok(id);
    }
    let certs = tls::generate().map_err(EmulatorError::Tls)?;
    let b64 = base64::engine::general_purpose::STANDARD;
    let id = Identity {
        admin_token: admin_token.map(str::to_string).unwrap_or_else(random_token),
        ca_pem: certs.ca_pem,
        cert_der: b64.encode(certs.cert_der.as_ref()),
        key_der: b64.encode(&certs.key_der),
    };
    let bytes = serde_json::to_vec_pretty(&id).map_err(|e| state_err(e.to_string()))?;
    write_private(path, &bytes).map_err(|e| state_err(e.to_string()))?;
    Ok(id)
}

/// Writes a file readable by its owner only (it holds a private key and a token).
fn write_private(path: &PathBuf, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)?.write_all(bytes)
}

fn write_snapshot(path: &PathBuf, snap: &Snapshot) {
    let tmp = path.with_extension("tmp");
    match serde_json::to_vec(snap) {
        Ok(bytes) => {
            if let Err(e) = write_private(&tmp, &bytes).and_then(|_| std::fs::rename(&tmp, path)) {
                tracing::warn!(path = %path.display(), error = %e, "snapshot not written");
            }
        }
        Err(e) => tracing::warn!(error = %e, "snapshot not serialised"),
    }
}

impl Emulator {
    /// Starts the server on a tokio runtime (must be called inside one).
    ///
    /// Errors: [`EmulatorError`] when the address cannot be bound, the snapshot cannot be
    /// read, or the authentication configuration is invalid (e.g. a non-`https` issuer, see
    /// [`EmulatorConfig::allow_insecure_loopback_issuers`]) or cannot be built.
    pub async fn start(config: EmulatorConfig) -> Result<Self, EmulatorError> {
        if let Some(cfg) = &config.authentication {
            auth::validate_authentication_configuration(
                cfg,
                config.allow_insecure_loopback_issuers,
            )
            .map_err(EmulatorError::Authentication)?;
        }
        let identity = match &config.identity_file {
            Some(path) => Some(load_or_create_identity(
                path,
                config.admin_token.as_deref(),
            )?),
            None => None,
        };
        let admin_token = match &identity {
            Some(id) => id.admin_token.clone(),
            None => config.admin_token.clone().unwrap_or_else(random_token),
        };
        let mut tokens = vec![StaticToken {
            token: admin_token.clone(),
            user: UserInfo::new("admin", &["system:masters"]),
        }];
        tokens.extend(config.tokens.iter().cloned());
        let auth = auth::Authenticator::new(tokens, config.authentication.as_ref())
            .map_err(EmulatorError::Authentication)?;
        let mut store = Store::new(config.watch_history);
        if let Some(path) = &config.state_file
            && path.exists()
        {
            let text = std::fs::read(path).map_err(|e| EmulatorError::State {
                path: path.clone(),
                reason: e.to_string(),
            })?;
            let snap: Snapshot =
                serde_json::from_slice(&text).map_err(|e| EmulatorError::State {
                    path: path.clone(),
                    reason: e.to_string(),
                })?;
            store.restore(snap);
            let crds: Vec<Value> = store
                .list_all("apiextensions.k8s.io", "customresourcedefinitions")
                .cloned()
                .collect();
            for crd in crds {
                api::register_crd(&mut store, &crd);
            }
        }
        seed(&mut store);
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| EmulatorError::Bind {
                addr: config.listen,
                source,
            })?;
        let addr = listener
            .local_addr()
            .map_err(|source| EmulatorError::Bind {
                addr: config.listen,
                source,
            })?;
        let feed = store.feed();
        let state = Arc::new(AppState {
            store: Mutex::new(store),
            auth,
            gc: Notify::new(),
            bookmark_interval: config.bookmark_interval,
            address: addr.to_string(),
        });
        let (tls_listener, ca_pem, listener) = if config.tls {
            let certs = match &identity {
                Some(id) => id.certs()?,
                None => tls::generate().map_err(EmulatorError::Tls)?,
            };
            let acceptor = tls::acceptor(&certs).map_err(EmulatorError::Tls)?;
            let l = tls::TlsListener::new(listener, acceptor).map_err(|source| {
                EmulatorError::Bind {
                    addr: config.listen,
                    source,
                }
            })?;
            (Some(l), Some(certs.ca_pem), None)
        } else {
            (None, None, Some(listener))
        };
        let app = axum::Router::new()
            .fallback(server::handle)
            .with_state(state.clone());
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let gc_state = state.clone();
        let gc_interval = config.gc_interval;
        let snapshot_path = config.state_file.clone();
        let dispatcher = feed.clone();
        let task = tokio::spawn(async move {
            let dispatcher = tokio::spawn(dispatcher.dispatch());
            let gc = tokio::spawn(async move {
                loop {
                    tokio::select! {
                        _ = gc_state.gc.notified() => {}
                        _ = tokio::time::sleep(gc_interval) => {}
                    }
                    // Repeat while passes change things (cascades), bounded.
                    for _ in 0..16 {
                        let changed = {
                            let mut store = gc_state.lock();
                            api::gc_pass(&mut store)
                        };
                        if !changed {
                            break;
                        }
                    }
                    if let Some(path) = &snapshot_path {
                        let snap = {
                            let mut store = gc_state.lock();
                            if store.dirty {
                                store.dirty = false;
                                Some(store.snapshot())
                            } else {
                                None
                            }
                        };
                        if let Some(snap) = snap {
                            write_snapshot(path, &snap);
                        }
                    }
                }
            });
            let shutdown = async {
                let _ = stop_rx.await;
            };
            let served = match (tls_listener, listener) {
                (Some(l), _) => axum::serve(l, app).with_graceful_shutdown(shutdown).await,
                (None, Some(l)) => {
                    use axum::serve::ListenerExt;
                    let l = l.tap_io(|tcp| {
                        let _ = tcp.set_nodelay(true);
                    });
                    axum::serve(l, app).with_graceful_shutdown(shutdown).await
                }
                (None, None) => Ok(()),
            };
            if let Err(e) = served {
                tracing::error!(error = %e, "emulator server stopped");
            }
            gc.abort();
            dispatcher.abort();
        });
        Ok(Self {
            addr,
            admin_token,
            state,
            stop: Some(stop_tx),
            feed,
            ca_pem,
            task: Some(task),
            state_file: config.state_file,
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://127.0.0.1:<port>` (or `http://` without TLS).
    pub fn base_url(&self) -> String {
        let scheme = if self.ca_pem.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.addr)
    }

    /// The CA certificate (PEM) that signed the server certificate, when TLS is on.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// The admin bearer token (user `admin`, group `system:masters`).
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// Adds a static token at run time (tests use this to act as other users).
    pub fn add_token(&self, token: &str, user: UserInfo) {
        self.state.auth.add_token(StaticToken {
            token: token.into(),
            user,
        });
    }

    /// A kubeconfig (YAML) for the admin user.
    pub fn kubeconfig_yaml(&self) -> String {
        self.kubeconfig_for(&self.admin_token)
    }

    /// A kubeconfig (YAML) using the given bearer token.
    pub fn kubeconfig_for(&self, token: &str) -> String {
        use base64::Engine;
        let ca = match &self.ca_pem {
            Some(pem) => format!(
                "    certificate-authority-data: {}\n",
                base64::engine::general_purpose::STANDARD.encode(pem)
            ),
            None => String::new(),
        };
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: emulator\n  cluster:\n{ca}    server: {}\ncontexts:\n- name: emulator\n  context:\n    cluster: emulator\n    user: emulator-admin\n    namespace: default\ncurrent-context: emulator\nusers:\n- name: emulator-admin\n  user:\n    token: {token}\n",
            self.base_url()
        )
    }

    /// Runs a closure with the store locked (for test setup and inspection).
    pub fn with_store<T>(&self, f: impl FnOnce(&mut Store) -> T) -> T {
        let mut store = self.state.lock();
        f(&mut store)
    }

    /// Stops the server, waits for it, and writes a final snapshot.
    pub async fn shutdown(mut self) {
        self.feed.close();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
        if let Some(path) = &self.state_file {
            let snap = self.state.lock().snapshot();
            write_snapshot(path, &snap);
        }
    }
}
