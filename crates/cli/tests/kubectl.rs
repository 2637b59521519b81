//! The whole path of SPEC §4 with the real programs: `banlieue auth kubeconfig` signs alice
//! in and downloads the kubeconfig, `banlieue auth login` signs her in for kubectl, and
//! the real `kubectl` runs `banlieue auth token` as its exec plugin against the Kubernetes
//! emulator, which verifies the token with our issuer's JWKS and maps it to
//! `console:alice` (`kubectl auth whoami`).

use std::path::Path;
use std::process::Command;

mod common;

use common::{cluster_trusting, console, log_in_as_alice};

const BIN: &str = env!("CARGO_BIN_EXE_banlieue");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_runs_the_plugin_and_the_cluster_sees_alice() {
    let dir = tempfile::tempdir().unwrap();
    // The cluster trusts the issuer and the console points at the cluster: bind the
    // console's port first, so its URL is known before either starts.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!("http://{}", listener.local_addr().unwrap());
    let cluster = cluster_trusting(&issuer).await;
    let accounts = console(dir.path(), &cluster, listener, &issuer).await;
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

    // The download signs in first (for the console's own audience).
    let mut download = cli(&["auth", "kubeconfig", "--issuer", &issuer, "--out"]);
    download.arg(&kubeconfig);
    log_in_as_alice(download, &issuer, None).await;
    let text = std::fs::read_to_string(&kubeconfig).unwrap();
    assert!(!text.contains("token:"), "no secret in the kubeconfig");

    let (callback, page) =
        log_in_as_alice(cli(&["auth", "login", "--issuer", &issuer]), &issuer, None).await;
    // The callback carries `iss` (RFC 9207, advertised by discovery, so required by the CLI),
    // and the page is answered once the code has been redeemed: it can say "Signed in".
    assert!(callback.contains("iss="), "{callback}");
    assert!(page.starts_with("Signed in"), "{page}");

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

    let logout = cli(&["auth", "logout", "--issuer", &issuer])
        .output()
        .unwrap();
    assert!(logout.status.success(), "{logout:?}");
    let events = accounts.store().recent_audit(20).await.unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.action == "oidc.token.revoke" && e.actor == "alice"),
        "logout revoked the refresh token at the issuer"
    );
    cluster.shutdown().await;
}
