//! `banlieue`: sign in to a banlieue console and get Kubernetes credentials.

use std::path::PathBuf;
use std::process::ExitCode;

use banlieue_cli::commands::{self, NO_BROWSER_ENV, Options};
use banlieue_cli::error::sanitize;
use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "banlieue",
    version,
    about = "Command-line tool of banlieue-console"
)]
struct Cli {
    #[command(subcommand)]
    command: Top,
}

#[derive(Subcommand)]
enum Top {
    /// Sign in and get credentials for kubectl.
    Auth {
        #[command(subcommand)]
        command: Auth,
    },
}

#[derive(Subcommand)]
enum Auth {
    /// Sign in with the browser and cache the session.
    Login(Common),
    /// Print an ExecCredential for kubectl (cached, refreshed, or after a browser sign-in).
    Token(Common),
    /// Revoke the refresh token and delete the cached session.
    Logout(Common),
    /// Show the cached session(s): subject, groups, audience, expiry. No token text.
    Status(Common),
    /// Download the kubeconfig from the issuer.
    Kubeconfig {
        #[command(flatten)]
        common: Common,
        /// Write to FILE (mode 0600) instead of stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Replace FILE if it exists.
        #[arg(long, requires = "out")]
        force: bool,
    },
}

#[derive(Args)]
struct Common {
    /// Issuer URL (https, or http to a loopback address only).
    #[arg(long, value_name = "URL", env = "BANLIEUE_ISSUER")]
    issuer: Option<String>,
    /// OAuth client id.
    #[arg(long, value_name = "ID", default_value = "banlieue-cli")]
    client_id: String,
    /// Audience of the ID token.
    #[arg(long, value_name = "AUD", default_value = "kubernetes")]
    audience: String,
    /// Extra trusted CA certificate(s), PEM, for an issuer with a private CA. kubectl
    /// passes its environment to the exec plugin, so `BANLIEUE_CA_FILE` serves a
    /// downloaded kubeconfig unchanged.
    #[arg(long, value_name = "PEM", env = "BANLIEUE_CA_FILE")]
    ca_file: Option<PathBuf>,
    /// Do not open a browser; only print the sign-in URL on stderr.
    #[arg(long)]
    no_browser: bool,
    /// Seconds to wait for a browser sign-in.
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    login_timeout: u64,
}

impl Common {
    fn options(&self) -> Options {
        let env_no_browser = std::env::var(NO_BROWSER_ENV)
            .map(|v| !v.is_empty() && v != "0")
            .unwrap_or(false);
        Options {
            issuer: self.issuer.clone(),
            client_id: self.client_id.clone(),
            audience: self.audience.clone(),
            ca_file: self.ca_file.clone(),
            no_browser: self.no_browser || env_no_browser,
            login_timeout_secs: self.login_timeout,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("banlieue: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    let Top::Auth { command } = cli.command;
    let result = runtime.block_on(async {
        match &command {
            Auth::Login(c) => commands::login(&c.options()).await,
            Auth::Token(c) => commands::token(&c.options()).await,
            Auth::Logout(c) => commands::logout(&c.options()).await,
            Auth::Status(c) => commands::status(&c.options()),
            Auth::Kubeconfig { common, out, force } => {
                commands::kubeconfig(&common.options(), out.as_deref(), *force).await
            }
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line, and nothing that came from elsewhere may drive the terminal.
            eprintln!("banlieue: error: {}", sanitize(&e.to_string(), 4000));
            ExitCode::FAILURE
        }
    }
}
