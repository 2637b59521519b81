//! Start-up: logging, the database, the first admin, and serving until a signal.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use banlieue_identity::{Accounts, IdentityError, PasswordHasher, ThrottlePolicy};
use banlieue_store::Store;
use leptos::prelude::LeptosOptions;
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
    let leptos = leptos_options(&config)?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {} (BANLIEUE_LISTEN)", config.listen))?;
    tracing::info!(listen = %config.listen, external_url = %config.external_url, "serving");
    let state = AppState {
        accounts,
        config: Arc::new(config),
        leptos,
    };
    let app = router(state, sessions);
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown_signal())
    .await?;
    store.close().await;
    tracing::info!("stopped");
    Ok(())
}

/// Leptos' options as cargo-leptos compiled them in (site root, output name), with the
/// listen address from our configuration.
pub fn leptos_options(config: &Config) -> anyhow::Result<LeptosOptions> {
    let mut options = leptos::config::get_configuration(None)
        .context("cannot read the Leptos site configuration")?
        .leptos_options;
    options.site_addr = config.listen;
    Ok(options)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
    tracing::info!("shutting down");
}
