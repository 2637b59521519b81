//! The whole path of SPEC §4 with the real programs: the console's issuer serves a
//! kubeconfig, `banlieue auth login` signs alice in through the authorization page, and
//! the real `kubectl` runs `banlieue auth token` as its exec plugin against the Kubernetes
//! emulator, which verifies the token with our issuer's JWKS and maps it to
//! `console:alice` (`kubectl auth whoami`).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use banlieue_domain::{Password, RoleName, Roles, UserName};
use banlieue_store::NewUser;
use clap::Parser;
use kube_emulator::auth::parse_authentication_configuration;
use kube_emulator::{Emulator, EmulatorConfig};
use time::OffsetDateTime;

const BIN: &str = env!("CARGO_BIN_EXE_banlieue");
const PASSWORD: &str = "correct horse battery";

/// Starts the console on `listener` (its issuer URL being `issuer`) with alice (role
/// `developer`) and a cluster entry pointing at `cluster`.
async fn console(dir: &Path, cluster: &Emulator, listener: tokio::net::TcpListener, issuer: &str) {
    let ca = dir.join("cluster-ca.pem");
    std::fs::write(&ca, cluster.ca_pem().unwrap()).unwrap();
    let database = format!("sqlite://{}/console.db", dir.display());
    let server_url = cluster.base_url();
    let args = [
        "banlieue-console",
        "--listen",
        "127.0.0.1:0",
        "--database-url",
        &database,
        "--external-url",
        issuer,
        "--cluster-server",
        &server_url,
        "--cluster-ca-file",
        ca.to_str().unwrap(),
    ];
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
        .create_user(&alice, &phc, OffsetDateTime::now_utc())
        .await
        .unwrap();
    tokio::spawn(server::startup::serve_on(
        listener,
        config,
        std::future::pending(),
    ));
}

/// The Kubernetes emulator trusting the console at `issuer` as the API server would be
/// configured (README, "Kubernetes API server configuration").
async fn cluster_trusting(issuer: &str) -> Emulator {
    let authentication = parse_authentication_configuration(&format!(
        "apiVersion: apiserver.config.k8s.io/v1beta1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: {issuer}
    audiences: [kubernetes]
  claimMappings:
    username:
      claim: sub
      prefix: 'console:'
    groups:
      claim: groups
      prefix: 'console:'
"
    ))
    .unwrap();
    Emulator::start(EmulatorConfig {
        authentication: Some(authentication),
        ..EmulatorConfig::default()
    })
    .await
    .unwrap()
}

/// What a person does in the browser: opens the printed URL, signs in on the card, and
/// the browser follows the redirect to the CLI's loopback listener.
async fn sign_in_as_alice(authorize_url: &str, issuer: &str) {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
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
    let done = http.get(&callback).send().await.unwrap();
    assert!(done.status().is_success(), "the CLI's callback page");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_runs_the_plugin_and_the_cluster_sees_alice() {
    let dir = tempfile::tempdir().unwrap();
    // The cluster trusts the issuer and the console points at the cluster: bind the
    // console's port first, so its URL is known before either starts.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!("http://{}", listener.local_addr().unwrap());
    let cluster = cluster_trusting(&issuer).await;
    console(dir.path(), &cluster, listener, &issuer).await;
    let config_dir = dir.path().join("banlieue");
    let kubeconfig = dir.path().join("kubeconfig");
    let cli = |args: &[&str]| {
        let mut command = Command::new(BIN);
        command
            .args(args)
            .env("BANLIEUE_CONFIG_DIR", &config_dir)
            .env("BANLIEUE_NO_BROWSER", "1")
            .env_remove("KUBERNETES_EXEC_INFO");
        command
    };

    let download = cli(&["auth", "kubeconfig", "--issuer", &issuer, "--out"])
        .arg(&kubeconfig)
        .output()
        .unwrap();
    assert!(download.status.success(), "{download:?}");
    let text = std::fs::read_to_string(&kubeconfig).unwrap();
    assert!(!text.contains("token:"), "no secret in the kubeconfig");

    let mut login = cli(&["auth", "login", "--issuer", &issuer])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
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
    sign_in_as_alice(&url, &issuer).await;
    let status = tokio::task::spawn_blocking(move || login.wait())
        .await
        .unwrap()
        .unwrap();
    let diagnostics = diagnostics.await.unwrap();
    assert!(status.success(), "{diagnostics}");

    let bin_dir = Path::new(BIN).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let whoami = tokio::task::spawn_blocking({
        let kubeconfig = kubeconfig.clone();
        let config_dir = config_dir.clone();
        move || {
            Command::new("kubectl")
                .args(["auth", "whoami", "-o", "json", "--kubeconfig"])
                .arg(&kubeconfig)
                .env("PATH", path)
                .env("BANLIEUE_CONFIG_DIR", &config_dir)
                .env_remove("KUBECONFIG")
                .output()
                .expect("kubectl on PATH")
        }
    })
    .await
    .unwrap();
    assert!(
        whoami.status.success(),
        "{}",
        String::from_utf8_lossy(&whoami.stderr)
    );
    let review: serde_json::Value = serde_json::from_slice(&whoami.stdout).unwrap();
    let user = &review["status"]["userInfo"];
    assert_eq!(user["username"], "console:alice");
    let groups: Vec<&str> = user["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g.as_str())
        .collect();
    assert!(groups.contains(&"console:developer"), "{groups:?}");
    cluster.shutdown().await;
}
