//! Start-up: logging, the database, the first admin, and serving until a signal.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::serve::ListenerExt;
use banlieue_identity::oidc::{Issuer, KeyEncryption};
use banlieue_identity::{Accounts, IdentityError, PasswordHasher, ThrottlePolicy};
use banlieue_store::Store;
use leptos::prelude::LeptosOptions;
use prometheus_client::registry::Registry;
use time::OffsetDateTime;
use tower_sessions_core::session_store::ExpiredDeletion;

use crate::config::{Config, KubeSource, LogFormat};
use crate::{AppState, router};
use cluster::Impersonation;

/// Logs go to stdout, so stderr carries only what a person must read (the initial admin
/// password, fatal errors).
///
/// Errors: `RUST_LOG` is set but is not a filter (`tracing_subscriber::EnvFilter`'s
/// directives), which would otherwise be ignored in silence.
pub fn init_logging(format: LogFormat) -> anyhow::Result<()> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(directives) => {
            tracing_subscriber::EnvFilter::try_new(&directives).with_context(|| {
                format!(
                    "RUST_LOG={directives:?} is not a log filter (e.g. `info,sqlx=warn`); unset it \
                 for the default"
                )
            })?
        }
        Err(_) => "info,sqlx=warn,tower_sessions=warn".into(),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stdout);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
    Ok(())
}

/// What `check-config` finds, as one line, checking what `serve` would need without
/// changing anything: the database (read-only, no migration), the key-encryption key
/// against every stored signing key, the site files, TLS and the tenants.
///
/// Errors: each problem `serve` would stop at, and a site without its files (which
/// `serve` only warns of, see [`site_problem`]).
pub async fn check_config(config: &Config) -> anyhow::Result<String> {
    use banlieue_store::DatabaseCheck;
    let check = Store::check(&config.database_url).await?;
    let database = match &check {
        DatabaseCheck::WillBeCreated { file } => {
            format!("database {} will be created at first start", file.display())
        }
        DatabaseCheck::Reachable { pending: 0, .. } => "database reachable".to_owned(),
        DatabaseCheck::Reachable { pending, .. } => {
            format!("database reachable, {pending} migrations to apply at start")
        }
    };
    let stored_keys = match check {
        DatabaseCheck::Reachable { signing_keys, .. } => signing_keys,
        DatabaseCheck::WillBeCreated { .. } => Vec::new(),
    };
    let files = &config.key_encryption;
    let sealing = if files.create_if_missing && !files.current.exists() {
        if !stored_keys.is_empty() {
            anyhow::bail!(
                "the key-encryption key {} is missing, and the database holds {} signing \
                 key(s) sealed with it: restore the file (a new key would open none of them)",
                files.current.display(),
                stored_keys.len()
            );
        }
        format!(
            "key-encryption key {} will be created at first start",
            files.current.display()
        )
    } else {
        let sealing = KeyEncryption::from_files(&files.current, files.previous.as_deref())?;
        for key in &stored_keys {
            sealing
                .check_opens(&key.kid, &key.private_key_sealed)
                .with_context(|| {
                    format!(
                        "the database's signing keys were sealed under another key-encryption \
                         key than {}: `serve` would not start (configure the one that sealed \
                         them, as the previous key during a rotation)",
                        files.current.display()
                    )
                })?;
        }
        format!(
            "key-encryption key {} (opens the {} stored signing keys)",
            files.current.display(),
            stored_keys.len()
        )
    };
    if let Some(problem) = site_problem(&leptos_options(config)) {
        anyhow::bail!(problem);
    }
    let served = match &config.tls {
        None => "HTTP".to_owned(),
        Some(tls) => format!("HTTPS with {}", tls.cert_file.display()),
    };
    let tenants = match &config.tenants {
        None => "no tenants".to_owned(),
        Some(settings) => {
            let kube = match &config.kube {
                KubeSource::Kubeconfig(path) => {
                    Some(Impersonation::from_kubeconfig(path.as_deref()).await?)
                }
                _ => None,
            };
            // Strict, as at start: a refused document fails the check.
            let registry = load_tenants(config, settings, kube.as_ref()).await?;
            format!(
                "{} tenants from {}",
                registry.snapshot().tenants.len(),
                registry.source().describe()
            )
        }
    };
    Ok(format!(
        "configuration is valid: listening on {} ({served}), external URL {}, {sealing}, \
         {database}, {tenants}",
        config.listen, config.external_url
    ))
}

/// Why the site's files (`LEPTOS_SITE_ROOT`, see [`leptos_options`]) cannot be served, if
/// they cannot: no `pkg` directory there. Pages would then come without their styles and
/// script; `serve` logs this, `check-config` refuses it.
pub fn site_problem(leptos: &LeptosOptions) -> Option<String> {
    let root = std::path::Path::new(&*leptos.site_root);
    let pkg = root.join(&*leptos.site_pkg_dir);
    if pkg.is_dir() {
        return None;
    }
    let relative = if root.is_relative() {
        let here = std::env::current_dir().unwrap_or_default();
        format!(", relative to the working directory {}", here.display())
    } else {
        String::new()
    };
    Some(format!(
        "LEPTOS_SITE_ROOT {}{relative} has no {} directory (the site `cargo leptos build` \
         writes): pages would be served without their styles and script; set it to the \
         site's absolute path",
        root.display(),
        leptos.site_pkg_dir
    ))
}

/// Opens the store and the account service with production hashing parameters.
pub async fn open_accounts(config: &Config) -> anyhow::Result<Arc<Accounts>> {
    let store = Store::open(&config.database_url)
        .await
        .context("cannot open the database (BANLIEUE_DATABASE_URL)")?;
    let session_lifetime =
        time::Duration::try_from(config.session_lifetime).context("the session lifetime")?;
    Ok(Arc::new(
        Accounts::new(
            store,
            PasswordHasher::rfc9106_second_recommendation(),
            ThrottlePolicy::default(),
        )
        .with_session_lifetime(session_lifetime),
    ))
}

/// Creates the first admin and prints its password: the single line on stderr.
pub async fn bootstrap_admin(accounts: &Accounts) -> Result<(), IdentityError> {
    let password = accounts.bootstrap_admin().await?;
    eprintln!("initial admin password: {password}");
    Ok(())
}

/// Serves until SIGINT or SIGTERM, then finishes requests in flight and closes the
/// database.
pub async fn serve(config: Config) -> anyhow::Result<()> {
    let listeners = Listeners::bind(&config).await?;
    let shutdown = shutdown_signal().context("cannot install signal handlers")?;
    serve_on(listeners, config, shutdown).await
}

/// The sockets `serve` answers on.
pub struct Listeners {
    /// The console: pages, forms, the issuer, the probes ([`Config::listen`]).
    pub console: tokio::net::TcpListener,
    /// `GET /metrics` alone, plain HTTP ([`Config::metrics_listen`]); none: metrics are
    /// counted but not served.
    pub metrics: Option<tokio::net::TcpListener>,
}

impl Listeners {
    /// Binds [`Config::listen`] and, when set, [`Config::metrics_listen`]. Errors: an
    /// address that cannot be bound, naming its setting.
    pub async fn bind(config: &Config) -> anyhow::Result<Self> {
        Ok(Self {
            console: bind(config.listen, "BANLIEUE_LISTEN").await?,
            metrics: match config.metrics_listen {
                Some(address) => Some(bind(address, "BANLIEUE_METRICS_LISTEN").await?),
                None => None,
            },
        })
    }
}

async fn bind(address: SocketAddr, setting: &str) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("cannot listen on {address} ({setting})"))
}

/// Serves `GET /metrics` of `registry` on `listener` until `stopping` is cancelled.
async fn serve_metrics(
    listener: tokio::net::TcpListener,
    registry: Arc<Registry>,
    stopping: tokio_util::sync::CancellationToken,
) {
    let served = axum::serve(listener, crate::metrics_router(registry))
        .with_graceful_shutdown(stopping.cancelled_owned())
        .await;
    if let Err(error) = served {
        tracing::error!(%error, "the metrics listener stopped");
    }
}

/// How long a shutdown waits for requests in flight (within Kubernetes' default 30 s
/// termination grace period, leaving time to release the controllers' Lease).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Serves on `listeners` until `shutdown` completes: opens the database (creating the
/// first admin on an empty one), prepares the issuer, and starts the background tasks.
/// With [`Config::tls`] the console's listener serves HTTPS only, its certificate reloaded
/// when the files change ([`crate::tls::TlsListener::with_reloading`]); the metrics
/// listener stays plain HTTP.
pub async fn serve_on(
    listeners: Listeners,
    mut config: Config,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let local = listeners.console.local_addr()?;
    // Before anything else starts: a pair that no longer loads stops the start here.
    let listener = match config.tls.clone() {
        None => Listening::Plain(listeners.console),
        Some(files) => Listening::Tls(crate::tls::TlsListener::with_reloading(
            listeners.console,
            files,
            crate::tls::RELOAD_INTERVAL,
        )?),
    };
    let accounts = open_accounts(&config).await?;
    let store = accounts.store().clone();
    if store.user_count().await? == 0 {
        match bootstrap_admin(&accounts).await {
            // Another replica starting on the same empty database made it first.
            Err(
                IdentityError::AdminExists
                | IdentityError::Store(banlieue_store::StoreError::AlreadyExists { .. }),
            ) => tracing::info!("another replica created the first admin"),
            created => created?,
        }
    }
    let sessions = store.session_backend().await?;
    tokio::spawn(
        sessions
            .clone()
            .continuously_delete_expired(Duration::from_secs(600)),
    );
    let issuer = open_issuer(&config, accounts.clone()).await?;
    tokio::spawn(maintain_issuer(issuer.clone()));
    if store.backend() == banlieue_store::Backend::Sqlite {
        tokio::spawn(checkpoint_database(store.clone()));
    }
    let (kube, dev_cluster) = open_cluster(&mut config).await?;
    let tenants = open_tenants(&config, kube.as_deref()).await?;
    if let (Some(dev), Some(tenants)) = (&dev_cluster, &tenants) {
        let snapshot = tenants.registry().snapshot();
        dev.admit_tenants(
            &config.external_url,
            snapshot.tenants.values().map(|t| t.issuer.as_str()),
        )
        .await?;
    }
    if let Some(access) = &kube {
        // Only groups the cluster lets the console impersonate are sent; users it lacks are added.
        tokio::spawn(access.clone().follow_impersonable());
    }
    let (stop_controllers, controllers_stop) = tokio::sync::watch::channel(false);
    let cluster_metrics = Arc::new(cluster::Metrics::default());
    let controllers = match &kube {
        Some(access) if config.run_controllers => Some(spawn_controllers(
            &config,
            access,
            cluster_metrics.clone(),
            controllers_stop,
        )?),
        _ => None,
    };
    let metrics = Arc::new(metrics_registry(
        &accounts,
        controllers.is_some().then_some(&*cluster_metrics),
        tenants.as_deref(),
    ));
    let leptos = leptos_options(&config);
    if let Some(problem) = site_problem(&leptos) {
        tracing::warn!("{problem}");
    }
    tracing::info!(
        listen = %local,
        external_url = %config.external_url,
        https = config.tls.is_some(),
        metrics = ?config.metrics_listen,
        "serving"
    );
    let console = crate::routes::use_cases(&accounts, kube, &config);
    let terminating = tokio_util::sync::CancellationToken::new();
    let stopping = tokio_util::sync::CancellationToken::new();
    let metrics_served = listeners
        .metrics
        .map(|listener| tokio::spawn(serve_metrics(listener, metrics, stopping.clone())));
    if console.has_cluster() {
        // The users the console may impersonate follow its database.
        let stopped = stopping.clone();
        let console = console.clone();
        tokio::spawn(async move {
            console
                .keep_impersonable_users(stopped.cancelled_owned())
                .await
        });
    }
    let state = AppState {
        console,
        accounts,
        issuer,
        config: Arc::new(config),
        leptos: Arc::new(leptos),
        tenants,
        terminating: terminating.clone(),
        stopping: stopping.clone(),
    };
    let shutdown_delay = state.config.shutdown_delay;
    let app = router(state, sessions);
    // Unready first, for the shutdown delay; then the listener closes.
    let shutdown = async move {
        shutdown.await;
        terminating.cancel();
        if !shutdown_delay.is_zero() {
            tracing::info!(delay = ?shutdown_delay, "unready; serving on until the delay ends");
            tokio::time::sleep(shutdown_delay).await;
        }
    };
    match listener {
        Listening::Plain(tcp) => serve_until(tcp, app, shutdown, stopping).await?,
        // A no-op tap: axum gives `ConnectInfo<SocketAddr>` (the peer address the
        // client-address layer reads) for tapped listeners of any kind.
        Listening::Tls(tls) => serve_until(tls.tap_io(|_| {}), app, shutdown, stopping).await?,
    }
    if let Some(metrics_served) = metrics_served {
        // A scraper holding its connection open must not keep the process up.
        metrics_served.abort();
    }
    let _ = stop_controllers.send(true);
    if let Some(controllers) = controllers {
        // They release their Lease; the cluster must still be there for that.
        let _ = tokio::time::timeout(Duration::from_secs(5), controllers).await;
    }
    if let Some(dev) = dev_cluster {
        dev.shutdown().await;
    }
    store.close().await;
    tracing::info!("stopped");
    Ok(())
}

/// The dev cluster of `make run` (the emulator with the chart and a demo pool), in builds
/// with the `dev-cluster` feature.
#[cfg(feature = "dev-cluster")]
use crate::dev_cluster::DevCluster;

/// Without the `dev-cluster` feature there is none (the configuration refuses to ask for
/// one), and the emulator is not linked.
#[cfg(not(feature = "dev-cluster"))]
pub enum DevCluster {}

#[cfg(not(feature = "dev-cluster"))]
impl DevCluster {
    async fn shutdown(self) {
        match self {}
    }

    async fn admit_tenants<'a>(
        &self,
        _issuer_url: &str,
        _tenant_issuers: impl IntoIterator<Item = &'a str>,
    ) -> anyhow::Result<()> {
        match *self {}
    }
}

/// What `serve_on` accepts connections from.
enum Listening {
    Plain(tokio::net::TcpListener),
    Tls(crate::tls::TlsListener),
}

/// Serves `app` on `listener` until `shutdown` completes, then gives requests in flight
/// [`SHUTDOWN_GRACE`] to finish: a client that never completes its request (or keeps a
/// connection idle) does not hold the process up beyond it.
async fn serve_until<L>(
    listener: L,
    app: axum::Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    stopping: tokio_util::sync::CancellationToken,
) -> std::io::Result<()>
where
    L: axum::serve::Listener<Addr = SocketAddr>,
    for<'a> SocketAddr: axum::extract::connect_info::Connected<axum::serve::IncomingStream<'a, L>>,
{
    let served = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown({
        let stopping = stopping.clone();
        async move {
            shutdown.await;
            stopping.cancel();
        }
    });
    tokio::select! {
        served = std::future::IntoFuture::into_future(served) => served?,
        () = async {
            stopping.cancelled().await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } => tracing::warn!(grace = ?SHUTDOWN_GRACE, "connections still open at shutdown; closing them"),
    }
    Ok(())
}

/// What `serve`'s `/metrics` serves: the identity metrics of `accounts` (sign-ins, tokens,
/// refresh reuse), when the controllers run in this process theirs, and with tenants the
/// verifier's (verifications by tenant and result, key fetches by endpoint and result).
/// Without them (no cluster, `--run-controllers=false`, no tenants) those metrics are
/// absent rather than zero.
pub fn metrics_registry(
    accounts: &Accounts,
    controllers: Option<&cluster::Metrics>,
    tenants: Option<&tenants::TenantVerifier>,
) -> Registry {
    let mut registry = Registry::default();
    accounts.metrics().register(&mut registry);
    if let Some(controllers) = controllers {
        controllers.register(&mut registry);
    }
    if let Some(tenants) = tenants {
        tenants.metrics().register(&mut registry);
    }
    registry
}

/// The key-encryption keys of `config`, the current one made first when it is the SQLite
/// default and missing, and the database holds no signing key a lost one sealed.
///
/// Errors: a missing default file beside sealed keys (a new one would open none of them),
/// or a key file that cannot be made or read.
async fn open_key_encryption(
    config: &Config,
    store: &banlieue_store::Store,
) -> anyhow::Result<Arc<KeyEncryption>> {
    let files = &config.key_encryption;
    if files.create_if_missing && !files.current.exists() {
        let sealed = store.signing_keys().await?.len();
        if sealed > 0 {
            anyhow::bail!(
                "the key-encryption key {} is missing, and the database holds {sealed} signing \
                 key(s) sealed with it: restore the file (a new key would open none of them), \
                 or start from an empty database",
                files.current.display()
            );
        }
        KeyEncryption::create_file(&files.current)?;
        tracing::info!(file = %files.current.display(), "made the key-encryption key");
    }
    Ok(Arc::new(KeyEncryption::from_files(
        &files.current,
        files.previous.as_deref(),
    )?))
}

/// The OIDC issuer, with a signing key ready (the first start creates one).
pub async fn open_issuer(config: &Config, accounts: Arc<Accounts>) -> anyhow::Result<Arc<Issuer>> {
    let issuer = Issuer::new(
        config.issuer.clone(),
        config.signing_keys,
        open_key_encryption(config, accounts.store()).await?,
        accounts,
    );
    issuer
        .keys()
        .maintain(OffsetDateTime::now_utc())
        .await
        .context("cannot prepare the OIDC signing keys")?;
    Ok(Arc::new(issuer))
}

/// Every minute: rotates and withdraws signing keys when due, and deletes codes, refresh
/// families and sign-in back-off rows that can no longer be used.
async fn maintain_issuer(issuer: Arc<Issuer>) {
    let mut tick = tokio::time::interval(Duration::from_secs(60));
    loop {
        tick.tick().await;
        let now = OffsetDateTime::now_utc();
        if let Err(error) = issuer.keys().maintain(now).await {
            tracing::error!(%error, "signing key maintenance failed");
        }
        let day_ago = now - Duration::from_secs(24 * 3600);
        if let Err(error) = issuer
            .accounts()
            .store()
            .prune_oidc_grants(day_ago, day_ago)
            .await
        {
            tracing::error!(%error, "pruning OIDC grants failed");
        }
        if let Err(error) = issuer.accounts().prune_sign_in_backoff(now).await {
            tracing::error!(%error, "pruning the sign-in back-off failed");
        }
    }
}

/// Checkpoints the SQLite log every [`Store::CHECKPOINT_INTERVAL`] until the store is
/// closed; a failure is logged once until a checkpoint succeeds again.
async fn checkpoint_database(store: Store) {
    let mut tick = tokio::time::interval(Store::CHECKPOINT_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tick.tick().await;
        if store.is_closed() {
            return;
        }
        match store.checkpoint().await {
            Ok(()) => failing = false,
            // Closed while this checkpoint waited: the shutdown, not a failure.
            Err(_) if store.is_closed() => return,
            Err(error) if !failing => {
                failing = true;
                tracing::warn!(%error, "database checkpoint failed");
            }
            Err(_) => {}
        }
    }
}

/// Runs the controllers alone under leader election until SIGINT or SIGTERM.
pub async fn run_controllers(
    config: Config,
    args: crate::config::ControllersArgs,
) -> anyhow::Result<()> {
    let access = match &config.kube {
        KubeSource::Kubeconfig(path) => Impersonation::from_kubeconfig(path.as_deref()).await?,
        KubeSource::Dev { .. } | KubeSource::None => anyhow::bail!(
            "no cluster configured: set BANLIEUE_KUBECONFIG or KUBECONFIG (the dev cluster runs inside `serve`)"
        ),
    };
    let mut controllers = controller_config(&config);
    controllers.namespace = args.watch_namespace;
    if let Some(identity) = args.identity {
        controllers.identity = identity;
    }
    if config.simulated_provider {
        controllers.simulated_provider = Some(cluster::SimulatedProviderConfig::default());
    }
    let metrics_listener = match config.metrics_listen {
        Some(address) => Some(bind(address, "BANLIEUE_METRICS_LISTEN").await?),
        None => None,
    };
    let shutdown = shutdown_signal().context("cannot install signal handlers")?;
    let metrics = Arc::new(cluster::Metrics::default());
    let stopping = tokio_util::sync::CancellationToken::new();
    if let Some(listener) = metrics_listener {
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        tokio::spawn(serve_metrics(
            listener,
            Arc::new(registry),
            stopping.clone(),
        ));
    }
    let ran =
        cluster::run_controllers(access.console_client()?, controllers, metrics, shutdown).await;
    stopping.cancel();
    Ok(ran?)
}

/// The controllers' settings: the Lease in the console's namespace, this process as the
/// holder (`HOSTNAME` and process id).
fn controller_config(config: &Config) -> cluster::ControllerConfig {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "banlieue-console".into());
    cluster::ControllerConfig::new(
        config.namespace.clone(),
        format!("{host}-{}", std::process::id()),
    )
}

/// The console's cluster, as configured: none, a kubeconfig, or the dev cluster (started
/// here, with the simulated provider for its pool).
pub async fn open_cluster(
    config: &mut Config,
) -> anyhow::Result<(Option<Arc<Impersonation>>, Option<DevCluster>)> {
    match config.kube.clone() {
        KubeSource::None => Ok((None, None)),
        KubeSource::Kubeconfig(path) => {
            let access = Impersonation::from_kubeconfig(path.as_deref())
                .await
                .context(
                    "cannot read the cluster credentials (BANLIEUE_KUBECONFIG / KUBECONFIG)",
                )?;
            Ok((Some(Arc::new(access)), None))
        }
        #[cfg(not(feature = "dev-cluster"))]
        KubeSource::Dev { .. } => Err(crate::config::ConfigError::DevClusterNotBuilt.into()),
        #[cfg(feature = "dev-cluster")]
        KubeSource::Dev { listen, dir } => {
            let dev = DevCluster::start(listen, &dir, &config.external_url).await?;
            if config.cluster.is_none() {
                config.cluster = Some(dev.cluster.clone());
            }
            Ok((Some(dev.access.clone()), Some(dev)))
        }
    }
}

/// The tenants' verifier, when a source is configured: the registry read strictly (any
/// refused document stops the start, naming its document and field), each warning
/// logged, then refreshed every interval for the life of the process.
///
/// Errors: the source cannot be read or holds a refused document; the providers' CA
/// certificates cannot be used.
pub async fn open_tenants(
    config: &Config,
    kube: Option<&Impersonation>,
) -> anyhow::Result<Option<Arc<tenants::TenantVerifier>>> {
    let Some(settings) = &config.tenants else {
        return Ok(None);
    };
    let registry = load_tenants(config, settings, kube).await?;
    let registry = Arc::new(registry);
    registry.clone().spawn_refresh();
    let keys = tenants::JwksCache::trusting(
        tenants::JwksPolicy::default(),
        settings.ca_pem.as_deref().unwrap_or_default().as_bytes(),
    )
    .context("BANLIEUE_TENANTS_CA_FILE: the providers' HTTP client")?;
    Ok(Some(Arc::new(tenants::TenantVerifier::new(registry, keys))))
}

/// The tenant registry of `settings`, read once, strictly, with its warnings logged (what
/// `serve` and `check-config` both do).
///
/// Errors: as [`tenants::TenantRegistry::load`]; a Kubernetes source without a cluster.
pub async fn load_tenants(
    config: &Config,
    settings: &crate::config::TenantsConfig,
    kube: Option<&Impersonation>,
) -> anyhow::Result<tenants::TenantRegistry> {
    let source = match &settings.source {
        crate::config::TenantsSource::File(path) => {
            tenants::TenantSource::File { path: path.clone() }
        }
        crate::config::TenantsSource::Kubernetes => tenants::TenantSource::Kubernetes {
            client: kube
                .context("BANLIEUE_TENANTS_SOURCE=kubernetes needs the console's cluster")?
                .console_client()?,
            namespace: config.namespace.clone(),
        },
    };
    let described = source.describe();
    let (registry, warnings) =
        tenants::TenantRegistry::load(source, settings.refresh, std::time::Instant::now())
            .await
            .with_context(|| format!("BANLIEUE_TENANTS_SOURCE: {described}"))?;
    for warning in &warnings {
        tracing::warn!(%warning, "tenant");
    }
    tracing::info!(
        source = %described,
        tenants = registry.snapshot().tenants.len(),
        "tenants read"
    );
    Ok(registry)
}

/// Runs the controllers in this process until `shutdown`, starting them again when they
/// stop with an error (never failing the console).
fn spawn_controllers(
    config: &Config,
    access: &Impersonation,
    metrics: Arc<cluster::Metrics>,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let mut controllers = controller_config(config);
    if config.simulated_provider {
        controllers.simulated_provider = Some(cluster::SimulatedProviderConfig::default());
    }
    let client = access.console_client()?;
    let mut shutdown = shutdown;
    let stop = async move {
        let _ = shutdown.wait_for(|stop| *stop).await;
    };
    Ok(tokio::spawn(cluster::run_controllers_retrying(
        client,
        controllers,
        metrics,
        stop,
    )))
}

/// Leptos' options: the site cargo-leptos builds (`target/site`, or `LEPTOS_SITE_ROOT`,
/// which cargo-leptos sets when it runs the server), our listen address, and hashed file
/// names when the build wrote their hashes beside the binary ([`app::assets::HASH_FILE`];
/// Leptos would panic looking for a hash file that is not there).
pub fn leptos_options(config: &Config) -> LeptosOptions {
    let site_root = std::env::var("LEPTOS_SITE_ROOT").unwrap_or_else(|_| "target/site".into());
    let hashed = app::assets::hash_file().is_some_and(|file| file.is_file());
    LeptosOptions::builder()
        .output_name("banlieue-console")
        .site_root(site_root)
        .site_pkg_dir("pkg")
        .site_addr(config.listen)
        .hash_files(hashed)
        .hash_file(app::assets::HASH_FILE.into())
        .build()
}

/// Registers for SIGINT and SIGTERM at once (so a signal that arrives while start-up is
/// still logging is not lost) and returns the future that completes on the first one.
fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
        tracing::info!("shutting down");
    })
}
