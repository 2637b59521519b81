//! SPEC §4 against the real kube-apiserver of the test bed (`scripts/testbed`), which
//! verifies our ID tokens itself through its structured `AuthenticationConfiguration`:
//! the console serves its issuer over https at the one URL the API server trusts, the
//! real `kubectl` runs `banlieue auth token` from a downloaded kubeconfig, and
//! `kubectl auth whoami` shows `console:alice` with her groups; a signing-key rotation is
//! picked up by the API server without a restart, and a disabled user's next refresh
//! fails. Skipped (with a message) without `BANLIEUE_TESTBED_DIR`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use banlieue_testbed::Testbed;
use base64::Engine;

mod common;

use common::{console_for, log_in_as_alice};

const BIN: &str = env!("CARGO_BIN_EXE_banlieue");

/// Runs the CLI and kubectl as a person would, with the test bed's CA trusted for the
/// issuer (`BANLIEUE_CA_FILE`, which kubectl hands on to its exec plugin).
struct Person {
    config_dir: PathBuf,
    kubeconfig: PathBuf,
    ca_file: PathBuf,
    issuer: String,
}

impl Person {
    fn cli(&self, args: &[&str]) -> Command {
        let mut command = Command::new(BIN);
        command
            .args(args)
            .env("BANLIEUE_CONFIG_DIR", &self.config_dir)
            .env("BANLIEUE_CA_FILE", &self.ca_file)
            .env("BANLIEUE_NO_BROWSER", "1")
            .env_remove("KUBERNETES_EXEC_INFO")
            .stdin(Stdio::null());
        command
    }

    async fn kubectl(&self, args: &[&str]) -> Output {
        let bin_dir = Path::new(BIN).parent().unwrap();
        let path = format!(
            "{}:{}",
            bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut command = Command::new("kubectl");
        command
            .args(args)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .env("PATH", path)
            .env("BANLIEUE_CONFIG_DIR", &self.config_dir)
            .env("BANLIEUE_CA_FILE", &self.ca_file)
            .env("BANLIEUE_NO_BROWSER", "1")
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null());
        tokio::task::spawn_blocking(move || command.output().expect("kubectl on PATH"))
            .await
            .unwrap()
    }

    /// `banlieue auth login`, signing in as alice on the authorization page.
    async fn login(&self) {
        let login = self.cli(&["auth", "login", "--issuer", &self.issuer]);
        log_in_as_alice(login, &self.issuer, Some(&self.ca_file)).await;
    }

    /// Marks the cached ID token as expired, as if its five minutes had passed: the next
    /// `banlieue auth token` refreshes.
    fn expire_cached_token(&self) {
        let sessions = self.config_dir.join("sessions");
        for entry in std::fs::read_dir(&sessions).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "json") {
                let mut cached: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
                cached["expires_at"] = 0.into();
                std::fs::write(&path, serde_json::to_vec(&cached).unwrap()).unwrap();
            }
        }
    }

    /// The `kid` of the ID token `banlieue auth token` hands kubectl.
    fn token_kid(&self) -> String {
        let out = self
            .cli(&["auth", "token", "--issuer", &self.issuer])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let credential: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let token = credential["status"]["token"].as_str().unwrap();
        let header = token.split('.').next().unwrap();
        let header = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(header)
            .unwrap();
        let header: serde_json::Value = serde_json::from_slice(&header).unwrap();
        header["kid"].as_str().unwrap().to_owned()
    }

    /// `kubectl auth whoami`, retried while the API server has not yet fetched the
    /// issuer's discovery document (it retries every 10 s until it has).
    async fn whoami(&self) -> serde_json::Value {
        let start = Instant::now();
        loop {
            let out = self.kubectl(&["auth", "whoami", "-o", "json"]).await;
            if out.status.success() {
                return serde_json::from_slice(&out.stdout).unwrap();
            }
            assert!(
                start.elapsed() < Duration::from_secs(90),
                "kubectl auth whoami kept failing: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_api_server_verifies_our_tokens_follows_rotation_and_refuses_the_disabled() {
    let Some(bed) = Testbed::from_env("kubectl against the real kube-apiserver") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let issuer = bed.issuer_url();
    let address = issuer.strip_prefix("https://").unwrap();
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .unwrap_or_else(|e| panic!("the test bed's issuer address {address}: {e}"));
    let cert = bed.issuer_cert_file();
    let key = bed.issuer_key_file();
    let (accounts, config) = console_for(
        dir.path(),
        &bed.server(),
        &bed.ca_file(),
        listener,
        &issuer,
        &[
            "--tls-cert-file",
            cert.to_str().unwrap(),
            "--tls-key-file",
            key.to_str().unwrap(),
            "--signing-key-activation-minutes",
            "1",
        ],
    )
    .await;
    let person = Person {
        config_dir: dir.path().join("banlieue"),
        kubeconfig: dir.path().join("kubeconfig"),
        ca_file: bed.ca_file(),
        issuer: issuer.clone(),
    };

    // The download signs in first (for the console's own audience).
    let mut download = person.cli(&["auth", "kubeconfig", "--issuer", &issuer, "--out"]);
    download.arg(&person.kubeconfig);
    log_in_as_alice(download, &issuer, Some(&person.ca_file)).await;
    let text = std::fs::read_to_string(&person.kubeconfig).unwrap();
    assert!(
        text.contains(&bed.server()),
        "points at the real API server"
    );
    assert!(!text.contains("token:"), "no secret in the kubeconfig");
    person.login().await;

    let review = person.whoami().await;
    let user = &review["status"]["userInfo"];
    assert_eq!(user["username"], "console:alice", "{review}");
    let groups: Vec<&str> = user["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g.as_str())
        .collect();
    assert!(
        groups.contains(&"console:developer") && groups.contains(&"system:authenticated"),
        "{groups:?}"
    );
    // The real RBAC of the chart applies to the token's identity.
    let can = person
        .kubectl(&[
            "auth",
            "can-i",
            "create",
            "virtualmachineclaims.banlieue.io",
        ])
        .await;
    assert_eq!(
        String::from_utf8_lossy(&can.stdout).trim(),
        "yes",
        "{can:?}"
    );

    // A new signing key: once the console signs with it (its key cache lasts 30 s), the
    // API server fetches the JWKS again for the unknown kid and accepts the token.
    let old_kid = person.token_kid();
    let keys = server::startup::open_issuer(&config, accounts.clone())
        .await
        .unwrap();
    // Published as if a minute ago, so it signs at once.
    let new_kid = keys
        .keys()
        .rotate(time::OffsetDateTime::now_utc() - config.signing_keys.activation_delay)
        .await
        .unwrap();
    assert_ne!(old_kid, new_kid);
    let start = Instant::now();
    loop {
        person.expire_cached_token();
        if person.token_kid() == new_kid {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the console never signed with {new_kid}"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let review = person.whoami().await;
    assert_eq!(review["status"]["userInfo"]["username"], "console:alice");

    // Disabled: the next refresh is refused, so kubectl gets no token.
    let alice = accounts
        .store()
        .user_by_name(&banlieue_domain::UserName::parse("alice").unwrap())
        .await
        .unwrap()
        .unwrap();
    accounts
        .store()
        .set_user_disabled(
            alice.id,
            alice.version,
            true,
            time::OffsetDateTime::now_utc(),
            &banlieue_store::AuditEvent::now(
                "root",
                "user.disable",
                "alice",
                std::net::Ipv4Addr::LOCALHOST.into(),
                "success",
                "",
            ),
        )
        .await
        .unwrap();
    person.expire_cached_token();
    let refused = person.kubectl(&["auth", "whoami"]).await;
    assert!(!refused.status.success(), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("invalid_grant") || stderr.contains("refused"),
        "{stderr}"
    );
}
