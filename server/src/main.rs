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
    startup::init_logging(config.log_format)?;
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => startup::serve(config).await,
        Command::Controllers(args) => startup::run_controllers(config, args).await,
        Command::CheckConfig => {
            println!("{}", startup::check_config(&config).await?);
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
