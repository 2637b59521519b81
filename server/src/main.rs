use banlieue_store::{DatabaseCheck, Store};
use clap::Parser;
use server::config::{AdminCommand, Cli, Command};
use server::startup;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let config = cli.settings.validate()?;
    startup::init_logging(config.log_format);
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => startup::serve(config).await,
        Command::Controllers(args) => startup::run_controllers(config, args).await,
        Command::CheckConfig => {
            let database = match Store::check(&config.database_url).await? {
                DatabaseCheck::WillBeCreated { file } => {
                    format!("database {} will be created at first start", file.display())
                }
                DatabaseCheck::Reachable { pending: 0 } => "database reachable".to_owned(),
                DatabaseCheck::Reachable { pending } => {
                    format!("database reachable, {pending} migrations to apply at start")
                }
            };
            let files = &config.key_encryption;
            let sealing = if files.create_if_missing && !files.current.exists() {
                format!(
                    "key-encryption key {} will be created at first start",
                    files.current.display()
                )
            } else {
                banlieue_identity::oidc::KeyEncryption::from_files(
                    &files.current,
                    files.previous.as_deref(),
                )?;
                format!("key-encryption key {}", files.current.display())
            };
            let served = match &config.tls {
                None => "HTTP".to_owned(),
                Some(tls) => format!("HTTPS with {}", tls.cert_file.display()),
            };
            let tenants = match &config.tenants {
                None => "no tenants".to_owned(),
                Some(settings) => {
                    let kube = match &config.kube {
                        server::config::KubeSource::Kubeconfig(path) => {
                            Some(cluster::Impersonation::from_kubeconfig(path.as_deref()).await?)
                        }
                        _ => None,
                    };
                    // Strict, as at start: a refused document fails the check.
                    let registry = startup::load_tenants(&config, settings, kube.as_ref()).await?;
                    format!(
                        "{} tenants from {}",
                        registry.snapshot().tenants.len(),
                        registry.source().describe()
                    )
                }
            };
            println!(
                "configuration is valid: listening on {} ({served}), external URL {}, {sealing}, {database}, {tenants}",
                config.listen, config.external_url
            );
            Ok(())
        }
        Command::Admin {
            command: AdminCommand::Bootstrap,
        } => {
            let accounts = startup::open_accounts(&config).await?;
            startup::bootstrap_admin(&accounts).await?;
            Ok(())
        }
        Command::Admin {
            command: AdminCommand::RotateSigningKey,
        } => {
            let accounts = startup::open_accounts(&config).await?;
            let issuer = startup::open_issuer(&config, accounts).await?;
            let kid = issuer
                .keys()
                .rotate(time::OffsetDateTime::now_utc())
                .await?;
            println!(
                "published signing key {kid}; it signs in {} minutes",
                config.signing_keys.activation_delay.as_secs() / 60
            );
            Ok(())
        }
        Command::Admin {
            command: AdminCommand::ResealSigningKeys,
        } => {
            let accounts = startup::open_accounts(&config).await?;
            let issuer = startup::open_issuer(&config, accounts).await?;
            let resealed = issuer.keys().reseal().await?;
            println!(
                "every signing key is sealed under the current key-encryption key ({resealed} sealed again)"
            );
            Ok(())
        }
        Command::Admin {
            command: AdminCommand::User { command },
        } => {
            let accounts = startup::open_accounts(&config).await?;
            server::operator::run(&accounts, command).await
        }
    }
}
