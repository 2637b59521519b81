//! Standalone Kubernetes API emulator: `kube-emulator --listen 127.0.0.1:6443
//! --kubeconfig-out kubeconfig.yaml [--state state.json] [--token-file tokens.csv]
//! [--authentication-config auth.yaml [--allow-insecure-loopback-issuers]]`.
//!
//! Serves HTTPS with a CA generated at start; writes an admin kubeconfig (CA included)
//! so `kubectl` can point at it.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use kube_emulator::{Emulator, EmulatorConfig, auth};

/// Command-line options.
#[derive(Debug, Parser)]
#[command(
    name = "kube-emulator",
    about = "A Kubernetes API emulator for development and tests"
)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Where to write the admin kubeconfig.
    #[arg(long)]
    kubeconfig_out: Option<PathBuf>,
    /// Snapshot file for persistence across restarts. The CA, server certificate and admin
    /// token are kept beside it (`<state>.identity.json`), so kubeconfigs stay valid.
    #[arg(long)]
    state: Option<PathBuf>,
    /// Fixed admin token (random otherwise).
    #[arg(long, env = "KUBE_EMULATOR_ADMIN_TOKEN")]
    admin_token: Option<String>,
    /// Static token file (`token,user,uid,"group1,group2"` per line).
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// `AuthenticationConfiguration` file (JWT authenticators).
    #[arg(long)]
    authentication_config: Option<PathBuf>,
    /// Emulator-only: accept `http://` JWT issuers on loopback hosts (127.0.0.0/8, ::1,
    /// localhost). The real kube-apiserver requires `https` issuers; other `http` issuers
    /// are refused even with this flag.
    #[arg(long)]
    allow_insecure_loopback_issuers: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse();
    let mut config = EmulatorConfig {
        listen: args.listen,
        admin_token: args.admin_token,
        identity_file: args.state.as_ref().map(|p| {
            let mut name = p.as_os_str().to_owned();
            name.push(".identity.json");
            PathBuf::from(name)
        }),
        state_file: args.state,
        allow_insecure_loopback_issuers: args.allow_insecure_loopback_issuers,
        ..EmulatorConfig::default()
    };
    if let Some(path) = &args.token_file {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        config.tokens = auth::parse_token_file(&text).map_err(anyhow::Error::msg)?;
    }
    if let Some(path) = &args.authentication_config {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        config.authentication =
            Some(auth::parse_authentication_configuration(&text).map_err(anyhow::Error::msg)?);
    }
    let emu = Emulator::start(config).await?;
    if let Some(path) = &args.kubeconfig_out {
        std::fs::write(path, emu.kubeconfig_yaml())
            .with_context(|| format!("writing {}", path.display()))?;
        tracing::info!(kubeconfig = %path.display(), "admin kubeconfig written");
    }
    tracing::info!(url = %emu.base_url(), "kube-emulator listening");
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    emu.shutdown().await;
    Ok(())
}
