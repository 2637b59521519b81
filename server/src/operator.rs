//! `banlieue-console admin user …`: user administration from the server's shell, as the
//! [`Actor::Operator`], through the same rules and audit events as the console.

use banlieue_identity::{Accounts, Actor, PasswordChoice, UserProfile};

use crate::config::UserCommand;

/// Runs one command; listings go to stdout, a generated password to stderr (once).
pub async fn run(accounts: &Accounts, command: UserCommand) -> anyhow::Result<()> {
    let operator = Actor::Operator;
    match command {
        UserCommand::List { search } => {
            let mut page = 0;
            loop {
                let listed = accounts.list_users(&operator, &search, page).await?;
                for user in &listed.users {
                    let roles: Vec<&str> = user.roles.iter().map(|r| r.as_str()).collect();
                    let state = if user.disabled {
                        "disabled"
                    } else if user.must_change_password {
                        "must-change-password"
                    } else {
                        "active"
                    };
                    println!("{}\t{}\t{}", user.name, roles.join(","), state);
                }
                let seen = (i64::from(page) + 1) * banlieue_identity::USERS_PER_PAGE;
                if seen >= listed.total {
                    return Ok(());
                }
                page += 1;
            }
        }
        UserCommand::Create {
            name,
            display_name,
            email,
            roles,
        } => {
            let profile = UserProfile {
                display_name,
                email,
                roles,
            };
            let (user, password) = accounts
                .create_user(&operator, &name, &profile, PasswordChoice::Generate)
                .await?;
            print_password(user.name.as_str(), password);
        }
        UserCommand::SetPassword { name } => {
            let password = accounts
                .reset_password(&operator, &name, PasswordChoice::Generate)
                .await?;
            print_password(&name, password);
        }
        UserCommand::Disable { name } => set_disabled(accounts, &name, true).await?,
        UserCommand::Enable { name } => set_disabled(accounts, &name, false).await?,
        UserCommand::RevokeSessions { name } => {
            accounts.revoke_user_sessions(&operator, &name).await?;
        }
    }
    Ok(())
}

async fn set_disabled(accounts: &Accounts, name: &str, disabled: bool) -> anyhow::Result<()> {
    let user = accounts.user(&Actor::Operator, name).await?;
    accounts
        .set_user_disabled(&Actor::Operator, name, user.version, disabled)
        .await?;
    Ok(())
}

fn print_password(name: &str, password: Option<String>) {
    if let Some(password) = password {
        eprintln!("password for {name}: {password}");
    }
}
