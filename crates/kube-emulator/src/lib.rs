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

pub mod api;
pub mod auth;
pub mod feed;
pub mod protobuf;
pub mod resources;
pub mod status;
pub mod store;
pub mod tls;

mod admission;
mod apply;
mod cel;
mod clock;
mod error;
mod identity;
mod persist;
mod rbac;
mod schema;
mod seed;
mod selector;
mod server;
mod table;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{Notify, oneshot};

pub use auth::{AuthenticationConfiguration, StaticToken, UserInfo};
pub use error::EmulatorError;
use identity::{load_or_create_identity, random_token};
use persist::write_snapshot;
use server::AppState;
use store::{Snapshot, Store};

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
        seed::seed(&mut store);
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
