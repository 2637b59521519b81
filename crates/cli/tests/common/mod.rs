//! The console's issuer and the Kubernetes emulator on loopback, and the browser step of
//! a sign-in, shared by the end-to-end tests.
#![allow(dead_code)] // each test binary uses a different part

use std::path::Path;
use std::sync::Arc;

use banlieue_domain::{Password, RoleName, Roles, UserName};
use banlieue_identity::Accounts;
use banlieue_store::{AuditEvent, NewUser};
use clap::Parser;
use kube_emulator::auth::parse_authentication_configuration;
use kube_emulator::{Emulator, EmulatorConfig};
use time::OffsetDateTime;

pub const PASSWORD: &str = "correct horse battery";

/// Starts the console on `listener` (its issuer URL being `issuer`) with alice (role
/// `developer`) and a cluster entry pointing at `cluster`.
pub async fn console(
    dir: &Path,
    cluster: &Emulator,
    listener: tokio::net::TcpListener,
    issuer: &str,
) -> Arc<Accounts> {
    let ca = dir.join("cluster-ca.pem");
    std::fs::write(&ca, cluster.ca_pem().unwrap()).unwrap();
    console_for(dir, &cluster.base_url(), &ca, listener, issuer, &[])
        .await
        .0
}

/// Starts the console on `listener` (its issuer URL being `issuer`) with alice (role
/// `developer`), its kubeconfigs pointing at the API server `server` with the CA in
/// `server_ca`, and `extra` command-line arguments (e.g. its TLS pair). Returns its
/// accounts and its configuration.
pub async fn console_for(
    dir: &Path,
    server: &str,
    server_ca: &Path,
    listener: tokio::net::TcpListener,
    issuer: &str,
    extra: &[&str],
) -> (Arc<Accounts>, server::config::Config) {
    let database = format!("sqlite://{}/console.db", dir.display());
    let mut args = vec![
        "banlieue-console",
        "--listen",
        "127.0.0.1:0",
        "--database-url",
        &database,
        "--external-url",
        issuer,
        "--cluster-server",
        server,
        "--cluster-ca-file",
        server_ca.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let config = server::config::Cli::try_parse_from(args)
        .unwrap()
        .settings
        .validate()
        .unwrap();
    let accounts = server::startup::open_accounts(&config).await.unwrap();
    let phc = accounts
        .hasher()
        .hash(&Password::new_secret(PASSWORD).unwrap())
        .await
        .unwrap();
    let alice = NewUser {
        name: UserName::parse("alice").unwrap(),
        display_name: "Alice".into(),
        email: String::new(),
        roles: Roles::new(vec![RoleName::parse("developer").unwrap()]).unwrap(),
        must_change_password: false,
    };
    accounts
        .store()
        .create_user(
            &alice,
            &phc,
            OffsetDateTime::now_utc(),
            &AuditEvent::now(
                "-",
                "user.create",
                "alice",
                std::net::IpAddr::from([127, 0, 0, 1]),
                "success",
                "",
            ),
        )
        .await
        .unwrap();
    let listeners = server::startup::Listeners {
        console: listener,
        metrics: None,
    };
    tokio::spawn(server::startup::serve_on(
        listeners,
        config.clone(),
        std::future::pending(),
    ));
    (accounts, config)
}

/// The Kubernetes emulator trusting the console at `issuer` as the API server would be
/// configured (README, "Kubernetes API server configuration").
pub async fn cluster_trusting(issuer: &str) -> Emulator {
    let authentication = parse_authentication_configuration(
        &server::dev_cluster::authentication_configuration(issuer),
    )
    .unwrap();
    Emulator::start(EmulatorConfig {
        authentication: Some(authentication),
        // The test console serves plain http on loopback.
        allow_insecure_loopback_issuers: true,
        ..EmulatorConfig::default()
    })
    .await
    .unwrap()
}

/// What a person does in the browser: opens the authorization URL and signs in on the
/// card. Returns where the browser is sent next (the client's redirect URI with the code).
pub async fn sign_in_as_alice(authorize_url: &str, issuer: &str) -> String {
    sign_in_as_alice_trusting(authorize_url, issuer, None).await
}

/// [`sign_in_as_alice`] with a browser that trusts the CA in `ca_file` too.
pub async fn sign_in_as_alice_trusting(
    authorize_url: &str,
    issuer: &str,
    ca_file: Option<&Path>,
) -> String {
    let mut http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none());
    if let Some(ca) = ca_file {
        let pem = std::fs::read(ca).unwrap();
        http = http.add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap());
    }
    let http = http.build().unwrap();
    let page = http.get(authorize_url).send().await.unwrap();
    assert_eq!(page.status(), 200, "the sign-in card");
    let mut fields: Vec<(String, String)> = url::Url::parse(authorize_url)
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect();
    fields.push(("user_name".into(), "alice".into()));
    fields.push(("password".into(), PASSWORD.into()));
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(&fields)
        .finish();
    let signed_in = http
        .post(format!("{issuer}/oidc/authorize"))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("origin", issuer)
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status(), 303);
    let callback = signed_in.headers()["location"].to_str().unwrap().to_owned();
    assert!(callback.starts_with("http://127.0.0.1:"), "{callback}");
    callback
}

/// What a person does with `banlieue auth login` (`login`, not yet started): waits for the
/// sign-in URL on its stderr, signs alice in on the authorization page (trusting
/// `ca_file` too), follows the redirect to the CLI's loopback callback, and waits for the
/// CLI to exit successfully. Returns the callback URL and the page the CLI answered.
pub async fn log_in_as_alice(
    mut login: std::process::Command,
    issuer: &str,
    ca_file: Option<&Path>,
) -> (String, String) {
    use std::io::{BufRead, BufReader};
    let mut login = login
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(login.stderr.take().unwrap());
    let (url_tx, url_rx) = tokio::sync::oneshot::channel();
    let diagnostics = tokio::task::spawn_blocking(move || {
        let mut url_tx = Some(url_tx);
        let mut lines = Vec::new();
        for line in stderr.lines().map_while(Result::ok) {
            if let Some(url) = line.strip_prefix("banlieue: sign in at: ")
                && let Some(tx) = url_tx.take()
            {
                let _ = tx.send(url.to_owned());
            }
            lines.push(line);
        }
        lines.join("\n")
    });
    let url = url_rx.await.expect("login prints the sign-in URL");
    let callback = sign_in_as_alice_trusting(&url, issuer, ca_file).await;
    let done = reqwest::get(&callback).await.unwrap();
    assert!(done.status().is_success(), "the CLI's callback page");
    let page = done.text().await.unwrap();
    let status = tokio::task::spawn_blocking(move || login.wait())
        .await
        .unwrap()
        .unwrap();
    let diagnostics = diagnostics.await.unwrap();
    assert!(status.success(), "{diagnostics}");
    (callback, page)
}
