//! Start-up: logging, the database, the first admin, and serving until a signal.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use banlieue_identity::oidc::Issuer;
use banlieue_identity::{Accounts, IdentityError, PasswordHasher, ThrottlePolicy};
use banlieue_store::Store;
use leptos::prelude::LeptosOptions;
use time::OffsetDateTime;
use tower_sessions_core::session_store::ExpiredDeletion;

use crate::config::{Config, LogFormat};
use crate::{AppState, router};

/// Logs go to stdout, so stderr carries only what a person must read (the initial admin
/// password, fatal errors).
pub fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,sqlx=warn,tower_sessions=warn".into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stdout);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Opens the store and the account service with production hashing parameters.
pub async fn open_accounts(config: &Config) -> anyhow::Result<Arc<Accounts>> {
    let store = Store::open(&config.database_url)
        .await
        .context("cannot open the database (BANLIEUE_DATABASE_URL)")?;
    Ok(Arc::new(Accounts::new(
        store,
        PasswordHasher::rfc9106_second_recommendation(),
        ThrottlePolicy::default(),
    )))
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
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {} (BANLIEUE_LISTEN)", config.listen))?;
    let shutdown = shutdown_signal().context("cannot install signal handlers")?;
    serve_on(listener, config, shutdown).await
}

/// Serves on `listener` until `shutdown` completes: opens the database (creating the
/// first admin on an empty one), prepares the issuer, and starts the background tasks.
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    config: Config,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let accounts = open_accounts(&config).await?;
    let store = accounts.store().clone();
    if store.user_count().await? == 0 {
        bootstrap_admin(&accounts).await?;
    }
    let sessions = store.session_backend().await?;
    tokio::spawn(
        sessions
            .clone()
            .continuously_delete_expired(Duration::from_secs(600)),
    );
    let issuer = open_issuer(&config, accounts.clone()).await?;
    tokio::spawn(maintain_issuer(issuer.clone()));
    let leptos = leptos_options(&config);
    tracing::info!(listen = %listener.local_addr()?, external_url = %config.external_url, "serving");
    let state = AppState {
        accounts,
        issuer,
        config: Arc::new(config),
        leptos,
    };
    let app = router(state, sessions);
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await?;
    store.close().await;
    tracing::info!("stopped");
    Ok(())
}

/// The OIDC issuer, with a signing key ready (the first start creates one).
pub async fn open_issuer(config: &Config, accounts: Arc<Accounts>) -> anyhow::Result<Arc<Issuer>> {
    let issuer = Issuer::new(config.issuer.clone(), config.signing_keys, accounts);
    issuer
        .keys()
        .maintain(OffsetDateTime::now_utc())
        .await
        .context("cannot prepare the OIDC signing keys")?;
    Ok(Arc::new(issuer))
}

/// Every minute: rotates and withdraws signing keys when due, and deletes codes and
/// refresh families that can no longer be used.
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
    }
}

/// Runs the controllers alone under leader election until SIGINT or SIGTERM.
pub async fn run_controllers(args: crate::config::ControllersArgs) -> anyhow::Result<()> {
    let client = cluster::client_from(args.kubeconfig.as_deref())
        .await
        .context("cannot reach the cluster (BANLIEUE_KUBECONFIG / KUBECONFIG)")?;
    let identity = args.identity.unwrap_or_else(|| {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "banlieue-console".into());
        format!("{host}-{}", std::process::id())
    });
    let lease_namespace = args
        .lease_namespace
        .unwrap_or_else(|| client.default_namespace().to_owned());
    let mut config = cluster::ControllerConfig::new(lease_namespace, identity);
    config.namespace = args.watch_namespace;
    if args.simulated_provider {
        config.simulated_provider = Some(cluster::SimulatedProviderConfig::default());
    }
    let shutdown = shutdown_signal().context("cannot install signal handlers")?;
    let metrics = Arc::new(cluster::Metrics::default());
    cluster::run_controllers(client, config, metrics, shutdown).await?;
    Ok(())
}

/// Leptos' options: the site cargo-leptos builds (`target/site`, or `LEPTOS_SITE_ROOT`,
/// which cargo-leptos sets when it runs the server) and our listen address.
pub fn leptos_options(config: &Config) -> LeptosOptions {
    let site_root = std::env::var("LEPTOS_SITE_ROOT").unwrap_or_else(|_| "target/site".into());
    LeptosOptions::builder()
        .output_name("banlieue-console")
        .site_root(site_root)
        .site_pkg_dir("pkg")
        .site_addr(config.listen)
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
