//! Two `banlieue-console serve` processes on one PostgreSQL database, as a Deployment
//! with two replicas behind one Service runs them, requests alternating between them:
//! both start at once on an empty database; a browser session made on one is valid on
//! the other and a sign-out on either ends it on both; refresh-token rotation and reuse
//! detection hold across them, also for 100 concurrent refreshes of one token; failed
//! sign-ins are counted once over both; and a signing key one publishes is in the other's
//! JWKS before it signs anything.
//!
//! Runs when `BANLIEUE_TEST_POSTGRES_URL` names a server (`make test` starts one);
//! skipped, saying so, otherwise.

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use banlieue_identity::ThrottlePolicy;
use banlieue_store::Store;
use serde_json::Value;
use support::{ORIGIN, TestApp, cheap_hasher, form};

const PASSWORD: &str = "correct horse battery";
// RFC 7636 Appendix B.
const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
const REDIRECT: &str = "http://127.0.0.1:53124/callback";

/// One `banlieue-console serve` process, killed when dropped.
struct Replica {
    child: Child,
    base: String,
    /// Its metrics listener, `http://127.0.0.1:<port>`.
    metrics: String,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Replica {
    /// Starts `serve` on `database` with the key-encryption key `kek`, the external URL
    /// of every replica being [`ORIGIN`]; returns once its `/readyz` answers 200.
    /// `env`: more of its variables.
    async fn start(
        database: &str,
        kek: &Path,
        env: &[(String, String)],
        http: &reqwest::Client,
    ) -> Self {
        let free_port = || {
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port()
        };
        let (port, metrics_port) = (free_port(), free_port());
        let mut child = Command::new(env!("CARGO_BIN_EXE_banlieue-console"))
            .arg("serve")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("BANLIEUE_DATABASE_URL", database)
            .env("BANLIEUE_KEY_ENCRYPTION_KEY_FILE", kek)
            .env("BANLIEUE_LISTEN", format!("127.0.0.1:{port}"))
            .env(
                "BANLIEUE_METRICS_LISTEN",
                format!("127.0.0.1:{metrics_port}"),
            )
            .env("BANLIEUE_EXTERNAL_URL", ORIGIN)
            .env("BANLIEUE_SIGNING_KEY_ACTIVATION_MINUTES", "1")
            // The tests are the proxy: X-Forwarded-For names the storm's many clients.
            .env("BANLIEUE_TRUSTED_PROXIES", "127.0.0.1")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let lines = BufReader::new(child.stderr.take().unwrap());
        let kept = stderr.clone();
        std::thread::spawn(move || {
            for line in lines.lines().map_while(Result::ok) {
                kept.lock().unwrap().push(line);
            }
        });
        let mut replica = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            metrics: format!("http://127.0.0.1:{metrics_port}"),
            stderr,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = replica.child.try_wait().unwrap() {
                panic!("the replica exited ({status}): {:?}", replica.stderr());
            }
            let ready = http
                .get(format!("{}/readyz", replica.base))
                .send()
                .await
                .is_ok_and(|r| r.status() == 200);
            if ready {
                return replica;
            }
            assert!(Instant::now() < deadline, "not ready in 60 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn stderr(&mut self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two replicas on one new database, and an in-process console on it for the set-up
/// (users made with cheap hashing).
struct Pair {
    replicas: Vec<Replica>,
    database: String,
    kek: std::path::PathBuf,
    env: Vec<(String, String)>,
    console: TestApp,
    http: reqwest::Client,
}

impl Pair {
    /// Two replicas on a new PostgreSQL database; `None` when no server is configured.
    async fn start() -> Option<Self> {
        let database =
            banlieue_testbed::postgres::scratch_database("the two-replica suite").await?;
        Some(Self::on(database, tempfile::tempdir().unwrap(), 2, Vec::new()).await)
    }

    /// `count` replicas on `database` started at once, as a Deployment's pods start (the
    /// migrations and the first admin race), their key-encryption key in `dir`, `env`
    /// added to their variables.
    async fn on(
        database: String,
        dir: tempfile::TempDir,
        count: usize,
        env: Vec<(String, String)>,
    ) -> Self {
        let kek = dir.path().join("key-encryption-key");
        {
            use std::os::unix::fs::OpenOptionsExt;
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&kek)
                .unwrap();
            std::io::Write::write_all(&mut file, b"KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=\n")
                .unwrap();
        }
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let replicas = futures::future::join_all(
            (0..count).map(|_| Replica::start(&database, &kek, &env, &http)),
        )
        .await;
        let store = Store::open(&database).await.unwrap();
        let console =
            TestApp::on_store(store, cheap_hasher(), ThrottlePolicy::default(), dir).await;
        Self {
            replicas,
            database,
            kek,
            env,
            console,
            http,
        }
    }

    fn base(&self, replica: usize) -> &str {
        &self.replicas[replica % self.replicas.len()].base
    }

    /// A same-origin form post to `replica`, as a browser sends it.
    async fn post(
        &self,
        replica: usize,
        path: &str,
        fields: &[(&str, &str)],
        cookie: Option<&str>,
    ) -> reqwest::Response {
        let mut request = self
            .http
            .post(format!("{}{path}", self.base(replica)))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("origin", ORIGIN)
            .header("sec-fetch-site", "same-origin")
            .body(form(fields));
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        request.send().await.unwrap()
    }

    async fn get(&self, replica: usize, path: &str, cookie: &str) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.base(replica)))
            .header("cookie", cookie)
            .send()
            .await
            .unwrap()
    }

    /// Signs `name` in on `replica`; returns the session cookie (`name=value`).
    async fn sign_in(&self, replica: usize, name: &str) -> String {
        let response = self
            .post(
                replica,
                "/sign-in",
                &[("user_name", name), ("password", PASSWORD)],
                None,
            )
            .await;
        assert_eq!(response.status(), 303);
        response
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find(|v| v.starts_with("banlieue-session="))
            .map(|v| v.split(';').next().unwrap().to_owned())
            .expect("a session cookie")
    }

    /// The CLI's tokens for the person of `cookie`: the code from `authorize_on`, redeemed
    /// on `redeem_on`.
    async fn tokens(&self, cookie: &str, authorize_on: usize, redeem_on: usize) -> Value {
        let confirmed = self
            .post(
                authorize_on,
                "/oidc/authorize",
                &[
                    ("response_type", "code"),
                    ("client_id", "banlieue-cli"),
                    ("redirect_uri", REDIRECT),
                    ("scope", "openid offline_access"),
                    ("state", "st"),
                    ("nonce", "nn"),
                    ("code_challenge", CHALLENGE),
                    ("code_challenge_method", "S256"),
                    ("decision", "allow"),
                ],
                Some(cookie),
            )
            .await;
        assert_eq!(confirmed.status(), 303);
        let location = url::Url::parse(confirmed.headers()["location"].to_str().unwrap()).unwrap();
        let code = location
            .query_pairs()
            .find_map(|(k, v)| (k == "code").then(|| v.into_owned()))
            .expect("a code");
        let (status, body) = self
            .token(
                redeem_on,
                &[
                    ("grant_type", "authorization_code"),
                    ("code", &code),
                    ("redirect_uri", REDIRECT),
                    ("client_id", "banlieue-cli"),
                    ("code_verifier", VERIFIER),
                ],
            )
            .await;
        assert_eq!(status, 200, "{body}");
        body
    }

    /// A token request to `replica`, as the CLI sends it (no Origin).
    async fn token(&self, replica: usize, fields: &[(&str, &str)]) -> (u16, Value) {
        let response = self
            .http
            .post(format!("{}/oidc/token", self.base(replica)))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form(fields))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (
            status,
            serde_json::from_str(&response.text().await.unwrap()).unwrap(),
        )
    }

    async fn refresh(&self, replica: usize, token: &str) -> (u16, Value) {
        self.token(
            replica,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", token),
                ("client_id", "banlieue-cli"),
            ],
        )
        .await
    }

    async fn jwks_kids(&self, replica: usize) -> Vec<String> {
        let body = self
            .http
            .get(format!(
                "{}{}",
                self.base(replica),
                banlieue_identity::oidc::endpoints::JWKS
            ))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let jwks: Value = serde_json::from_str(&body).unwrap();
        jwks["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|key| key["kid"].as_str().unwrap().to_owned())
            .collect()
    }
}

fn refresh_token(tokens: &Value) -> String {
    tokens["refresh_token"].as_str().unwrap().to_owned()
}

/// The `kid` in the header of the ID token in `tokens`.
fn id_token_kid(tokens: &Value) -> String {
    use base64::Engine;
    let jwt = tokens["id_token"].as_str().unwrap();
    let header = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(jwt.split('.').next().unwrap())
        .unwrap();
    let header: Value = serde_json::from_slice(&header).unwrap();
    header["kid"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_start_at_once_on_an_empty_database_and_make_one_admin() {
    let Some(mut pair) = Pair::start().await else {
        return;
    };
    let printed: usize = pair
        .replicas
        .iter_mut()
        .map(|replica| {
            replica
                .stderr()
                .iter()
                .filter(|line| line.starts_with("initial admin password: "))
                .count()
        })
        .sum();
    assert_eq!(printed, 1, "one replica made the first admin and said so");
    assert_eq!(pair.console.store().user_count().await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_made_on_one_replica_is_valid_on_the_other_and_signing_out_ends_it_on_both() {
    let Some(pair) = Pair::start().await else {
        return;
    };
    pair.console
        .create_user("alice", PASSWORD, &["developer"], false)
        .await;
    let cookie = pair.sign_in(0, "alice").await;
    for replica in [1, 0, 1] {
        let page = pair.get(replica, "/", &cookie).await;
        assert_eq!(page.status(), 200, "replica {replica} knows the session");
    }
    let out = pair.post(1, "/sign-out", &[], Some(&cookie)).await;
    assert_eq!(out.status(), 303);
    for replica in [0, 1] {
        let page = pair.get(replica, "/", &cookie).await;
        assert_eq!(page.status(), 303, "replica {replica} ended the session");
        assert_eq!(page.headers()["location"], "/sign-in");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_sign_ins_are_counted_once_over_both_replicas() {
    let Some(pair) = Pair::start().await else {
        return;
    };
    pair.console
        .create_user("alice", PASSWORD, &["developer"], false)
        .await;
    let attempt = |replica: usize, password: &'static str| {
        pair.http
            .post(format!("{}/sign-in", pair.base(replica)))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("origin", ORIGIN)
            .header("sec-fetch-site", "same-origin")
            .header("x-forwarded-for", "203.0.113.7")
            .body(form(&[("user_name", "alice"), ("password", password)]))
            .send()
    };
    // Five free failures from one address, alternating: each replica saw two or three.
    for replica in 0..5 {
        let answered = attempt(replica, "wrong").await.unwrap();
        assert_eq!(
            answered.status(),
            200,
            "failure {} is answered",
            replica + 1
        );
    }
    for replica in [0, 1] {
        let waits = attempt(replica, PASSWORD).await.unwrap();
        assert_eq!(waits.status(), 429, "replica {replica} counts all five");
        assert_eq!(waits.headers()["retry-after"], "1");
    }
    // Parallel guesses spread over both replicas get one password check at a time.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let burst = futures::future::join_all((0..8).map(|i| attempt(i, "wrong"))).await;
    let checked = burst
        .iter()
        .filter(|response| response.as_ref().unwrap().status() == 200)
        .count();
    assert_eq!(checked, 1, "one of eight parallel guesses was checked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_rotation_and_reuse_detection_hold_across_replicas() {
    let Some(pair) = Pair::start().await else {
        return;
    };
    pair.console
        .create_user("alice", PASSWORD, &["developer"], false)
        .await;
    let cookie = pair.sign_in(0, "alice").await;
    let r1 = refresh_token(&pair.tokens(&cookie, 0, 1).await);
    let (status, second) = pair.refresh(0, &r1).await;
    assert_eq!(status, 200, "{second}");
    let r2 = refresh_token(&second);
    let (status, third) = pair.refresh(1, &r2).await;
    assert_eq!(status, 200, "{third}");
    let r3 = refresh_token(&third);
    // r1 again, on the replica that did not rotate it: a reuse, which ends the family.
    let (status, reuse) = pair.refresh(1, &r1).await;
    assert_eq!(
        (status, &reuse["error"]),
        (400, &Value::from("invalid_grant"))
    );
    let (status, after) = pair.refresh(0, &r3).await;
    assert_eq!(
        (status, &after["error"]),
        (400, &Value::from("invalid_grant")),
        "the whole family is revoked, on the other replica too"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_concurrent_refreshes_over_both_replicas_make_one_successor() {
    let Some(pair) = Pair::start().await else {
        return;
    };
    pair.console
        .create_user("alice", PASSWORD, &["developer"], false)
        .await;
    let cookie = pair.sign_in(1, "alice").await;
    let r1 = refresh_token(&pair.tokens(&cookie, 1, 0).await);
    let answers = futures::future::join_all((0..100).map(|i| pair.refresh(i, &r1))).await;
    let mut successors: Vec<String> = answers
        .iter()
        .filter(|(status, _)| *status == 200)
        .map(|(_, body)| refresh_token(body))
        .collect();
    successors.sort();
    successors.dedup();
    assert_eq!(
        successors.len(),
        1,
        "one successor, whichever replica answered: {answers:?}"
    );
    for (status, body) in &answers {
        assert!(
            *status == 200 || body["error"] == "invalid_grant",
            "{status} {body}"
        );
    }
    // The successor is live and the family intact: it rotates on either replica.
    let (status, next) = pair.refresh(0, &successors[0]).await;
    assert_eq!(status, 200, "{next}");
    let (status, last) = pair.refresh(1, &refresh_token(&next)).await;
    assert_eq!(status, 200, "{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_one_replica_publishes_is_in_the_others_jwks_before_it_signs() {
    let Some(pair) = Pair::start().await else {
        return;
    };
    pair.console
        .create_user("alice", PASSWORD, &["developer"], false)
        .await;
    let cookie = pair.sign_in(0, "alice").await;
    let first = id_token_kid(&pair.tokens(&cookie, 0, 0).await);
    assert!(pair.jwks_kids(1).await.contains(&first));
    // An operator's rotation from a shell beside the replicas: the new key signs after
    // the one-minute activation delay.
    let rotated = Command::new(env!("CARGO_BIN_EXE_banlieue-console"))
        .args(["admin", "rotate-signing-key"])
        .env_clear()
        .env("BANLIEUE_DATABASE_URL", &pair.database)
        .env("BANLIEUE_KEY_ENCRYPTION_KEY_FILE", &pair.kek)
        .env("BANLIEUE_SIGNING_KEY_ACTIVATION_MINUTES", "1")
        .output()
        .unwrap();
    assert!(rotated.status.success(), "{rotated:?}");
    let keys = pair.console.store().signing_keys().await.unwrap();
    let newest = keys.iter().max_by_key(|key| key.created_at).unwrap();
    let (kid, activates_at) = (newest.kid.clone(), newest.activates_at);
    assert_ne!(kid, first);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut seen_by_other = None;
    loop {
        let now = time::OffsetDateTime::now_utc();
        let kids = pair.jwks_kids(1).await;
        if seen_by_other.is_none() && kids.contains(&kid) {
            seen_by_other = Some(now);
        }
        let signed_with = id_token_kid(&pair.tokens(&cookie, 0, 0).await);
        if signed_with == kid {
            let seen =
                seen_by_other.expect("replica 1 published the key before replica 0 signed with it");
            assert!(
                seen < activates_at,
                "published at {seen}, activates at {activates_at}"
            );
            assert!(pair.jwks_kids(1).await.contains(&kid));
            break;
        }
        assert_eq!(
            signed_with, first,
            "until the new key activates, the old one signs"
        );
        assert!(Instant::now() < deadline, "the new key never signed");
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// What one request of a storm got: the action and its target, and whether it completed
/// (the answer a completed action gives).
#[derive(Debug)]
enum Outcome {
    SignedIn { user: String, cookie: String },
    Created { user: String },
    Refreshed { family: usize, successor: String },
    NotCompleted,
}

/// The people and refresh families a storm works on, made before it.
struct Storm {
    admin_cookie: String,
    users: Vec<String>,
    /// Each family's refresh token before the storm.
    families: Vec<String>,
    /// Sessions made before the storm, on each replica.
    sessions: Vec<String>,
}

impl Pair {
    /// A replica on `database` started again in place of `replica` (same key, same
    /// external URL).
    async fn restart(&mut self, replica: usize) {
        let again = Replica::start(&self.database, &self.kek, &self.env, &self.http).await;
        self.replicas[replica] = again;
    }

    async fn prepare_storm(&self) -> Storm {
        self.console
            .create_user("root", PASSWORD, &["admin"], false)
            .await;
        let users: Vec<String> = (0..20).map(|i| format!("user{i}")).collect();
        for user in &users {
            self.console
                .create_user(user, PASSWORD, &["developer"], false)
                .await;
        }
        let mut sessions = Vec::new();
        let mut families = Vec::new();
        for (i, user) in users.iter().enumerate() {
            let cookie = self.sign_in(i, user).await;
            if i < 10 {
                families.push(refresh_token(&self.tokens(&cookie, i, i + 1).await));
            }
            sessions.push(cookie);
        }
        Storm {
            admin_cookie: self.sign_in(1, "root").await,
            users,
            families,
            sessions,
        }
    }

    /// 100 concurrent requests spread over `targets`, each from a client address of its
    /// own: sign-ins, user creations by the admin, and refreshes of the storm's families.
    /// `kill` ends the replica of that pid with SIGKILL once five sign-ins or creations
    /// have completed, while the others are still being hashed.
    async fn storm(&self, storm: &Storm, targets: &[usize], kill: u32) -> Vec<Outcome> {
        let completed = std::sync::atomic::AtomicUsize::new(0);
        let completed = &completed;
        let request = |i: usize| async move {
            let replica = targets[i % targets.len()];
            let client = format!("10.0.{}.{}", i / 250, i % 250 + 1);
            let outcome = match i % 3 {
                0 => {
                    let user = &storm.users[i % storm.users.len()];
                    let response = self
                        .http
                        .post(format!("{}/sign-in", self.base(replica)))
                        .header("content-type", "application/x-www-form-urlencoded")
                        .header("origin", ORIGIN)
                        .header("sec-fetch-site", "same-origin")
                        .header("x-forwarded-for", &client)
                        .body(form(&[("user_name", user), ("password", PASSWORD)]))
                        .send()
                        .await;
                    let cookie = response.ok().filter(|r| r.status() == 303).and_then(|r| {
                        r.headers()
                            .get_all("set-cookie")
                            .iter()
                            .filter_map(|v| v.to_str().ok())
                            .find(|v| v.starts_with("banlieue-session="))
                            .map(|v| v.split(';').next().unwrap().to_owned())
                    });
                    match cookie {
                        Some(cookie) => Outcome::SignedIn {
                            user: user.clone(),
                            cookie,
                        },
                        None => Outcome::NotCompleted,
                    }
                }
                1 => {
                    let user = format!("storm{i}");
                    let response = self
                        .http
                        .post(format!("{}/users", self.base(replica)))
                        .header("content-type", "application/x-www-form-urlencoded")
                        .header("origin", ORIGIN)
                        .header("sec-fetch-site", "same-origin")
                        .header("cookie", &storm.admin_cookie)
                        .header("x-forwarded-for", &client)
                        .body(form(&[
                            ("name", &user),
                            ("roles", "viewer"),
                            ("password_mode", "generate"),
                        ]))
                        .send()
                        .await;
                    match response {
                        // A refusal redirects too, back to the Users page.
                        Ok(r)
                            if r.status() == 303
                                && r.headers().get("location").is_some_and(|to| {
                                    to.as_bytes()
                                        .starts_with(format!("/users/{user}?").as_bytes())
                                }) =>
                        {
                            Outcome::Created { user }
                        }
                        _ => Outcome::NotCompleted,
                    }
                }
                _ => {
                    let family = i % storm.families.len();
                    let response = self
                        .http
                        .post(format!("{}/oidc/token", self.base(replica)))
                        .header("content-type", "application/x-www-form-urlencoded")
                        .body(form(&[
                            ("grant_type", "refresh_token"),
                            ("refresh_token", &storm.families[family]),
                            ("client_id", "banlieue-cli"),
                        ]))
                        .send()
                        .await;
                    let body = match response {
                        Ok(r) if r.status() == 200 => r.text().await.ok(),
                        _ => None,
                    };
                    match body.and_then(|b| serde_json::from_str::<Value>(&b).ok()) {
                        Some(tokens) => Outcome::Refreshed {
                            family,
                            successor: refresh_token(&tokens),
                        },
                        None => Outcome::NotCompleted,
                    }
                }
            };
            if matches!(outcome, Outcome::SignedIn { .. } | Outcome::Created { .. }) {
                completed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            outcome
        };
        let killer = async {
            let deadline = Instant::now() + Duration::from_secs(60);
            while completed.load(std::sync::atomic::Ordering::SeqCst) < 5 {
                assert!(Instant::now() < deadline, "the storm completed nothing");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let killed = Command::new("kill")
                .args(["-KILL", &kill.to_string()])
                .status()
                .unwrap();
            assert!(killed.success());
        };
        let (outcomes, ()) = tokio::join!(futures::future::join_all((0..100).map(request)), killer);
        eprintln!(
            "STORM {:?}",
            outcomes
                .iter()
                .map(|o| match o {
                    Outcome::SignedIn { .. } => "S",
                    Outcome::Created { .. } => "C",
                    Outcome::Refreshed { .. } => "R",
                    Outcome::NotCompleted => "-",
                })
                .collect::<String>()
        );
        outcomes
    }

    /// What must hold after a storm in which a replica was killed, checked on `survivor`:
    /// every user complete and audited, every completed action audited, no refresh
    /// family with two live tokens, and every session — made before the storm or in it —
    /// served.
    async fn check_after_storm(&self, storm: &Storm, outcomes: &[Outcome], survivor: usize) {
        let store = self.console.store();
        let audited = |action: &'static str| async move {
            store
                .query_audit(
                    &banlieue_store::AuditQuery {
                        action: action.into(),
                        result: "success".into(),
                        ..Default::default()
                    },
                    0,
                    10_000,
                )
                .await
                .unwrap()
                .events
        };
        let creations = audited("user.create").await;
        let users = store.list_users("", 0, 1_000).await.unwrap().users;
        for user in &users {
            assert!(
                store.password_phc(user.id).await.unwrap().is_some(),
                "{} has a password",
                user.name
            );
            assert!(
                creations.iter().any(|e| e.target == user.name.as_str()),
                "{} was created with its audit row",
                user.name
            );
        }
        let sign_ins = audited("session.sign-in").await;
        let refreshes = audited("oidc.token.refresh").await;
        let mut answered_refreshes = 0;
        let mut sessions = storm.sessions.clone();
        for outcome in outcomes {
            match outcome {
                Outcome::Created { user } => assert!(
                    users.iter().any(|u| u.name.as_str() == user),
                    "{user} was answered as created"
                ),
                Outcome::SignedIn { user, cookie } => {
                    assert!(sign_ins.iter().any(|e| &e.target == user));
                    sessions.push(cookie.clone());
                }
                Outcome::Refreshed { .. } => answered_refreshes += 1,
                Outcome::NotCompleted => {}
            }
        }
        // Ten refreshes before the storm were audited too.
        assert!(
            refreshes.len() >= answered_refreshes,
            "every answered refresh is audited"
        );
        let mut successors: Vec<Vec<&str>> = vec![Vec::new(); storm.families.len()];
        for outcome in outcomes {
            if let Outcome::Refreshed { family, successor } = outcome {
                successors[*family].push(successor);
            }
        }
        for (family, mut seen) in successors.into_iter().enumerate() {
            seen.sort();
            seen.dedup();
            assert!(seen.len() <= 1, "family {family}: two successors {seen:?}");
            if let Some(successor) = seen.first() {
                let (status, body) = self.refresh(survivor, successor).await;
                assert_eq!(status, 200, "family {family} lives on: {body}");
            }
        }
        let live: Vec<(String, i64)> = sqlx::query_as(
            "SELECT family_id, COUNT(*) FROM oidc_refresh_tokens WHERE retired_ms IS NULL \
             GROUP BY family_id HAVING COUNT(*) > 1",
        )
        .fetch_all(&self.raw().await)
        .await
        .unwrap();
        assert!(live.is_empty(), "families with two live tokens: {live:?}");
        for cookie in &sessions {
            let page = self.get(survivor, "/", cookie).await;
            assert_eq!(page.status(), 200, "the survivor serves every session");
        }
    }

    /// A plain connection pool on the database, for what no store method reads.
    async fn raw(&self) -> sqlx::AnyPool {
        sqlx::any::install_default_drivers();
        sqlx::AnyPool::connect(&self.database).await.unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_replica_in_a_storm_loses_nothing_and_the_other_serves_every_session() {
    let Some(pair) = Pair::start().await else {
        return;
    };
    let storm = pair.prepare_storm().await;
    let outcomes = pair
        .storm(&storm, &[0, 1], pair.replicas[0].child.id())
        .await;
    pair.check_after_storm(&storm, &outcomes, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_one_sqlite_replica_in_a_storm_loses_nothing_once_it_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}/console.db", dir.path().display());
    let mut one = Pair::on(database, dir, 1, Vec::new()).await;
    let storm = one.prepare_storm().await;
    let outcomes = one.storm(&storm, &[0], one.replicas[0].child.id()).await;
    one.restart(0).await;
    one.check_after_storm(&storm, &outcomes, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_requests_in_flight_finish_then_exits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}/console.db", dir.path().display());
    let mut one = Pair::on(database, dir, 1, Vec::new()).await;
    // Hashed with the production parameters: checking it takes the replica a few
    // hundred milliseconds of argon2id, through which the signal arrives.
    let phc = banlieue_identity::PasswordHasher::rfc9106_second_recommendation()
        .hash(&banlieue_domain::Password::new_secret(PASSWORD).unwrap())
        .await
        .unwrap();
    let alice = banlieue_store::NewUser {
        name: banlieue_domain::UserName::parse("alice").unwrap(),
        display_name: String::new(),
        email: String::new(),
        roles: banlieue_domain::Roles::default(),
        must_change_password: false,
    };
    one.console
        .store()
        .create_user(
            &alice,
            &phc,
            time::OffsetDateTime::now_utc(),
            &banlieue_store::AuditEvent::now(
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
    let pid = one.replicas[0].child.id();
    let (signed_in, ()) = tokio::join!(one.sign_in(0, "alice"), async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let sent = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    });
    assert!(signed_in.starts_with("banlieue-session="));
    let status = one.replicas[0].child.wait().unwrap();
    assert!(status.success(), "a graceful stop exits 0: {status}");
    let stderr = one.replicas[0].stderr();
    assert!(
        stderr
            .iter()
            .all(|line| line.starts_with("initial admin password: ")),
        "nothing else to say on stderr: {stderr:?}"
    );
}

/// The holder of the controllers' Lease in `cluster` (`spec.holderIdentity`), if any.
async fn lease_holder(cluster: &server::dev_cluster::DevCluster) -> Option<String> {
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(cluster.access.console_client().unwrap(), "banlieue-system");
    leases
        .get_opt("banlieue-console-controllers")
        .await
        .unwrap()
        .and_then(|lease| lease.spec?.holder_identity)
        .filter(|holder| !holder.is_empty())
}

impl Pair {
    /// `banlieue_reconciles_total{controller="pool"}` on `replica`'s `/metrics` (0 when
    /// absent).
    async fn pool_reconciles(&self, replica: usize) -> f64 {
        let exposition = self
            .http
            .get(format!(
                "{}/metrics",
                self.replicas[replica % self.replicas.len()].metrics
            ))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        support::sample(
            &exposition,
            r#"banlieue_reconciles_total{controller="pool"}"#,
        )
        .unwrap_or(0.0)
    }

    /// Which replica holds the Lease, by the process id in its identity
    /// (`<host>-<pid>`); waits up to `within` for one to.
    async fn holder(&self, cluster: &server::dev_cluster::DevCluster, within: Duration) -> usize {
        let deadline = Instant::now() + within;
        loop {
            if let Some(holder) = lease_holder(cluster).await {
                let pid = holder.rsplit('-').next().unwrap();
                if let Some(index) = self
                    .replicas
                    .iter()
                    .position(|r| r.child.id().to_string() == pid)
                {
                    return index;
                }
            }
            assert!(
                Instant::now() < deadline,
                "no replica took the Lease in {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_lease_holder_reconciles_a_killed_holder_hands_over_and_sigterm_releases() {
    let Some(database) =
        banlieue_testbed::postgres::scratch_database("the two-replica Lease test").await
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cluster = server::dev_cluster::DevCluster::start(
        "127.0.0.1:0".parse().unwrap(),
        &dir.path().join("cluster"),
        ORIGIN,
    )
    .await
    .unwrap();
    let kubeconfig = dir.path().join("console.kubeconfig");
    std::fs::write(&kubeconfig, &cluster.console_kubeconfig).unwrap();
    let env = vec![(
        "BANLIEUE_KUBECONFIG".to_owned(),
        kubeconfig.display().to_string(),
    )];
    let mut pair = Pair::on(database, dir, 2, env).await;
    let first = pair.holder(&cluster, Duration::from_secs(30)).await;
    let other = 1 - first;
    // The demo pool is reconciled by the holder alone (every 10 s at the latest).
    let deadline = Instant::now() + Duration::from_secs(30);
    while pair.pool_reconciles(first).await == 0.0 {
        assert!(Instant::now() < deadline, "the holder never reconciled");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        pair.pool_reconciles(other).await,
        0.0,
        "only the holder reconciles"
    );
    // Killed, the holder renews no more: the other takes over once the Lease's 15 s run
    // out (plus its 5 s retry grace).
    let killed_at = Instant::now();
    pair.replicas[first].child.kill().unwrap();
    pair.replicas[first].child.wait().unwrap();
    let successor = pair.replicas[other].child.id().to_string();
    while !lease_holder(&cluster)
        .await
        .is_some_and(|holder| holder.ends_with(&format!("-{successor}")))
    {
        assert!(
            killed_at.elapsed() <= Duration::from_secs(20),
            "no hand-over within the Lease's duration and grace"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while pair.pool_reconciles(other).await == 0.0 {
        assert!(Instant::now() < deadline, "the new holder never reconciled");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // SIGTERM: the holder releases the Lease as it stops.
    let stopped = Command::new("kill")
        .args(["-TERM", &successor])
        .status()
        .unwrap();
    assert!(stopped.success());
    assert!(pair.replicas[other].child.wait().unwrap().success());
    assert_eq!(lease_holder(&cluster).await, None, "released at shutdown");
    cluster.shutdown().await;
}
