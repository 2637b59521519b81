//! An in-process console on a temporary database, driven through its router: SQLite, or
//! PostgreSQL when `BANLIEUE_TEST_SERVER_DATABASE=postgres` (`make test` runs the suite
//! both ways; [`scratch_store`]).
#![allow(dead_code)] // each test binary uses a different part of the harness

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use argon2::Params;
use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, Request, StatusCode, header};
use banlieue_domain::{Password, RoleName, Roles, UserName};
use banlieue_identity::oidc::Issuer;
use banlieue_identity::{Accounts, PasswordHasher, ThrottlePolicy};
use banlieue_store::{NewUser, Store, UserRecord};
use clap::Parser;
use http_body_util::BodyExt;
use server::config::Cli;
use server::{AppState, metrics_router, router, startup};
use time::OffsetDateTime;
use tower::ServiceExt;

pub const ORIGIN: &str = "http://127.0.0.1:3000";

pub struct TestApp {
    pub router: Router,
    /// The metrics listener's router (`--metrics-listen`).
    pub metrics_router: Router,
    pub accounts: Arc<Accounts>,
    pub issuer: Arc<Issuer>,
    /// Where [`TestApp::serve`] listens (`http://127.0.0.1:<port>`), else the default
    /// external URL.
    pub base_url: String,
    /// The console's "shutting down" signal ([`AppState::stopping`]).
    pub stopping: tokio_util::sync::CancellationToken,
    /// The tenants' verifier, when the arguments configured tenants; kept by
    /// [`TestApp::acting_through`].
    pub tenants: Option<Arc<tenants::TenantVerifier>>,
    _dir: tempfile::TempDir,
}

/// The variable that puts the in-process consoles on PostgreSQL: `postgres` (any other
/// value, or none: SQLite).
pub const DATABASE_VARIABLE: &str = "BANLIEUE_TEST_SERVER_DATABASE";

/// A new, empty console database: a SQLite file in `dir`, or with
/// [`DATABASE_VARIABLE`]`=postgres` a database of its own on the server
/// [`banlieue_testbed::postgres::URL_VARIABLE`] names.
pub async fn scratch_store(dir: &tempfile::TempDir) -> Store {
    let url = if std::env::var(DATABASE_VARIABLE).is_ok_and(|v| v == "postgres") {
        banlieue_testbed::postgres::required_scratch_database().await
    } else {
        format!("sqlite://{}/console.db", dir.path().display())
    };
    Store::open(&url).await.unwrap()
}

/// Cheap argon2id parameters: the tests count verifications, they do not time them.
pub fn cheap_hasher() -> PasswordHasher {
    PasswordHasher::with_params(Params::new(1024, 1, 1, None).unwrap())
}

impl TestApp {
    pub async fn new() -> Self {
        Self::with_throttle(ThrottlePolicy::default()).await
    }

    /// A console whose throttle never engages: for tests that repeat failures.
    pub async fn unthrottled() -> Self {
        Self::with_throttle(ThrottlePolicy {
            free_failures: u32::MAX,
            free_failures_per_user: u32::MAX,
            ..ThrottlePolicy::default()
        })
        .await
    }

    pub async fn with_throttle(throttle: ThrottlePolicy) -> Self {
        Self::with_hasher(cheap_hasher(), throttle).await
    }

    pub async fn with_hasher(hasher: PasswordHasher, throttle: ThrottlePolicy) -> Self {
        let dir = tempfile::tempdir().unwrap();
        Self::on_store(scratch_store(&dir).await, hasher, throttle, dir).await
    }

    pub async fn on_store(
        store: Store,
        hasher: PasswordHasher,
        throttle: ThrottlePolicy,
        dir: tempfile::TempDir,
    ) -> Self {
        Self::configured(store, hasher, throttle, dir, &[], None).await
    }

    /// A console built from command-line `args` (e.g. `--cluster-server …`), with the
    /// defaults for everything else.
    pub async fn with_args(args: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = scratch_store(&dir).await;
        Self::configured(
            store,
            cheap_hasher(),
            ThrottlePolicy::default(),
            dir,
            args,
            None,
        )
        .await
    }

    /// A console serving the site (the wasm bundle, its script, the CSS) from `site_root`
    /// instead of `LEPTOS_SITE_ROOT`.
    pub async fn serving_site(site_root: &std::path::Path) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = scratch_store(&dir).await;
        let (hasher, throttle) = (cheap_hasher(), ThrottlePolicy::default());
        Self::configured(store, hasher, throttle, dir, &[], Some(site_root)).await
    }

    async fn configured(
        store: Store,
        hasher: PasswordHasher,
        throttle: ThrottlePolicy,
        dir: tempfile::TempDir,
        args: &[&str],
        site_root: Option<&std::path::Path>,
    ) -> Self {
        // One key-encryption key for every test console, so consoles sharing a store
        // (a restart, a second replica) open each other's signing keys.
        let kek = dir.path().join("key-encryption-key");
        if !kek.exists() {
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
        let kek = kek.to_str().unwrap().to_owned();
        let cli = Cli::try_parse_from(
            [
                "banlieue-console",
                "--listen",
                "127.0.0.1:3000",
                "--key-encryption-key-file",
                &kek,
            ]
            .iter()
            .chain(args),
        )
        .unwrap();
        let config = cli.settings.validate().unwrap();
        let sessions = store.session_backend().await.unwrap();
        let accounts =
            Arc::new(Accounts::new(store, hasher, throttle).with_user_cache_ttl(Duration::ZERO));
        let issuer = startup::open_issuer(&config, accounts.clone())
            .await
            .unwrap();
        let stopping = tokio_util::sync::CancellationToken::new();

        let mut leptos = startup::leptos_options(&config);
        if let Some(site_root) = site_root {
            leptos.site_root = site_root.to_str().unwrap().into();
        }
        let tenants = startup::open_tenants(&config, None).await.unwrap();
        let metrics = Arc::new(startup::metrics_registry(
            &accounts,
            None,
            tenants.as_deref(),
        ));
        let state = AppState {
            terminating: Default::default(),
            stopping: stopping.clone(),
            accounts: accounts.clone(),
            issuer: issuer.clone(),
            console: server::routes::use_cases(&accounts, None, &config),
            leptos: std::sync::Arc::new(leptos),
            tenants: tenants.clone(),
            config: Arc::new(config),
        };
        Self {
            tenants,
            base_url: state.config.external_url.clone(),
            router: router(state, sessions),
            metrics_router: metrics_router(metrics),
            accounts,
            issuer,
            stopping,
            _dir: dir,
        }
    }

    /// A console connected to a fresh dev cluster (the emulator with the chart, a `demo`
    /// namespace and pool `sandbox`), whose controllers and simulated provider run until
    /// the test's runtime ends.
    pub async fn with_dev_cluster() -> (Self, server::dev_cluster::DevCluster) {
        let app = Self::new().await;
        let dir = app._dir.path().join("cluster");
        let dev = server::dev_cluster::DevCluster::start(
            "127.0.0.1:0".parse().unwrap(),
            &dir,
            "http://127.0.0.1:3000",
        )
        .await
        .unwrap();
        let controllers = cluster::ControllerConfig::new("banlieue-system", "test");
        (app.with_cluster(dev.access.clone(), controllers).await, dev)
    }

    /// This console acting in the cluster through `access`, with the claim and pool
    /// controllers (and a fast simulated provider) running on `controllers` until the
    /// test's runtime ends.
    pub async fn with_cluster(
        self,
        access: Arc<cluster::Impersonation>,
        mut controllers: cluster::ControllerConfig,
    ) -> Self {
        controllers.simulated_provider = Some(cluster::SimulatedProviderConfig {
            ready_after: Some(Duration::from_millis(200)),
            destroy_after: Duration::from_millis(100),
        });
        let client = access.console_client().unwrap();
        let metrics = Arc::new(cluster::Metrics::default());
        tokio::spawn(cluster::run_controllers(
            client,
            controllers,
            metrics.clone(),
            std::future::pending(),
        ));
        self.acting_through(access, Some(&*metrics)).await
    }

    /// This console acting in the cluster through `access`, with no controllers;
    /// `metrics`: the controllers' metrics to serve, if any run.
    pub async fn acting_through(
        mut self,
        access: Arc<cluster::Impersonation>,
        metrics: Option<&cluster::Metrics>,
    ) -> Self {
        let config = server::config::Cli::try_parse_from(["banlieue-console"])
            .unwrap()
            .settings
            .validate()
            .unwrap();
        let sessions = self.store().session_backend().await.unwrap();
        self.metrics_router = metrics_router(Arc::new(startup::metrics_registry(
            &self.accounts,
            metrics,
            self.tenants.as_deref(),
        )));
        let state = AppState {
            terminating: Default::default(),
            stopping: self.stopping.clone(),
            accounts: self.accounts.clone(),
            issuer: self.issuer.clone(),
            console: server::routes::use_cases(&self.accounts, Some(access), &config),
            leptos: std::sync::Arc::new(startup::leptos_options(&config)),
            tenants: self.tenants.clone(),
            config: Arc::new(config),
        };
        self.router = router(state, sessions);
        self
    }

    /// A console served over HTTP on a fresh loopback port, its issuer URL being that
    /// address. The server stops with the test's runtime.
    pub async fn serve(args: &[&str]) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let base = format!("http://{address}");
        let mut all = vec!["--external-url", base.as_str()];
        all.extend_from_slice(args);
        let app = Self::with_args(&all).await;
        let service = app
            .router
            .clone()
            .into_make_service_with_connect_info::<SocketAddr>();
        tokio::spawn(async move { axum::serve(listener, service).await });
        Self {
            base_url: base,
            ..app
        }
    }

    pub fn store(&self) -> &Store {
        self.accounts.store()
    }

    pub async fn create_user(
        &self,
        name: &str,
        password: &str,
        roles: &[&str],
        must_change: bool,
    ) -> UserRecord {
        let phc = self
            .accounts
            .hasher()
            .hash(&Password::new_secret(password).unwrap())
            .await
            .unwrap();
        let new = NewUser {
            name: UserName::parse(name).unwrap(),
            display_name: String::new(),
            email: String::new(),
            roles: Roles::new(roles.iter().map(|r| RoleName::parse(r).unwrap()).collect()).unwrap(),
            must_change_password: must_change,
        };
        self.store()
            .create_user(
                &new,
                &phc,
                OffsetDateTime::now_utc(),
                &banlieue_store::AuditEvent::now(
                    "-",
                    "user.create",
                    name,
                    IpAddr::from([127, 0, 0, 1]),
                    "success",
                    "",
                ),
            )
            .await
            .unwrap()
    }

    /// The stored user `name` (which must exist).
    pub async fn user(&self, name: &str) -> UserRecord {
        self.store()
            .user_by_name(&UserName::parse(name).unwrap())
            .await
            .unwrap()
            .expect("the user exists")
    }

    /// A VirtualMachineClaim `name` in pool `sandbox` for `subject` of this console's
    /// issuer, lasting an hour.
    pub fn claim_for(name: &str, subject: &str) -> cluster::crd::VirtualMachineClaim {
        cluster::crd::VirtualMachineClaim {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: cluster::crd::VirtualMachineClaimSpec {
                pool_ref: "sandbox".into(),
                ttl_seconds: 3600,
                subject: cluster::crd::ClaimSubject {
                    issuer: "http://127.0.0.1:3000".into(),
                    id: subject.into(),
                },
            },
            status: None,
        }
    }

    pub async fn send(&self, request: Request<Body>) -> TestResponse {
        let response = self.router.clone().oneshot(request).await.unwrap();
        TestResponse::read(response).await
    }

    /// The answer to a refused form (post/redirect/get): asserts `303` to `page`, then
    /// `GET`s it as `cookie`, where the refusal is shown once.
    pub async fn refused_page(
        &self,
        posted: TestResponse,
        page: &str,
        cookie: &str,
    ) -> TestResponse {
        assert_eq!(
            (posted.status, posted.location()),
            (StatusCode::SEE_OTHER, Some(page)),
            "{}",
            posted.body
        );
        self.send(get(page, Some(cookie))).await
    }

    /// `GET /metrics` on the metrics listener, unauthenticated as Prometheus scrapes it;
    /// asserts 200 and returns the exposition.
    pub async fn metrics(&self) -> String {
        let response = self.scrape().await;
        assert_eq!(response.status, StatusCode::OK, "{}", response.body);
        response.body
    }

    /// `GET /metrics` on the metrics listener's router, as it answers.
    pub async fn scrape(&self) -> TestResponse {
        let response = self
            .metrics_router
            .clone()
            .oneshot(get("/metrics", None))
            .await
            .unwrap();
        TestResponse::read(response).await
    }

    /// Signs in and returns the session cookie (`name=value`).
    pub async fn sign_in(&self, name: &str, password: &str) -> String {
        let response = self
            .send(post_form(
                "/sign-in",
                form(&[("user_name", name), ("password", password)]),
                None,
            ))
            .await;
        assert_eq!(response.status, StatusCode::SEE_OTHER, "{}", response.body);
        response.session_cookie().expect("a session cookie")
    }

    /// An ID token of the session `cookie`'s person for `audience`, through the issuer's
    /// own authorization code flow (the `banlieue-cli` client, PKCE S256), as the CLI
    /// gets one.
    pub async fn id_token(&self, cookie: &str, audience: &str) -> String {
        // RFC 7636 Appendix B.
        const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
        const REDIRECT: &str = "http://127.0.0.1:53124/callback";
        let confirmed = self
            .send(post_form(
                "/oidc/authorize",
                form(&[
                    ("response_type", "code"),
                    ("client_id", "banlieue-cli"),
                    ("redirect_uri", REDIRECT),
                    ("scope", "openid"),
                    ("state", "st"),
                    ("nonce", "nn"),
                    ("code_challenge", CHALLENGE),
                    ("code_challenge_method", "S256"),
                    ("audience", audience),
                    ("decision", "allow"),
                ]),
                Some(cookie),
            ))
            .await;
        assert_eq!(
            confirmed.status,
            StatusCode::SEE_OTHER,
            "{}",
            confirmed.body
        );
        let redirect = url::Url::parse(confirmed.location().unwrap()).unwrap();
        let code = redirect
            .query_pairs()
            .find(|(name, _)| name == "code")
            .map(|(_, code)| code.into_owned())
            .expect("a code");
        let exchanged = self
            .send(
                Request::post("/oidc/token")
                    .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                    .body(Body::from(form(&[
                        ("grant_type", "authorization_code"),
                        ("code", &code),
                        ("redirect_uri", REDIRECT),
                        ("client_id", "banlieue-cli"),
                        ("code_verifier", VERIFIER),
                    ])))
                    .unwrap(),
            )
            .await;
        assert_eq!(exchanged.status, StatusCode::OK, "{}", exchanged.body);
        let body: serde_json::Value = serde_json::from_str(&exchanged.body).unwrap();
        body["id_token"].as_str().unwrap().to_owned()
    }
}

pub struct TestResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl TestResponse {
    /// Reads `response` whole.
    async fn read(response: axum::response::Response) -> Self {
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        Self {
            status,
            headers,
            body: String::from_utf8_lossy(&bytes).into_owned(),
        }
    }

    /// `name=value` of the session cookie this response sets, if any.
    pub fn session_cookie(&self) -> Option<String> {
        self.headers
            .get_all(header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find(|v| v.starts_with("banlieue-session="))
            .map(|v| v.split(';').next().unwrap().to_owned())
    }

    pub fn location(&self) -> Option<&str> {
        self.headers
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
    }

    /// The body with the per-response CSP nonce blanked, for comparing two responses.
    /// The body with the CSP nonce as `NONCE`, and the page state the browser hydrates
    /// from (postcard in base64, see `app::App`) as JSON, so that tests compare and search
    /// what it holds as text.
    pub fn body_without_nonce(&self) -> String {
        let csp = self
            .header(header::CONTENT_SECURITY_POLICY.as_str())
            .unwrap_or_default();
        let body = match csp
            .split("'nonce-")
            .nth(1)
            .and_then(|rest| rest.split('\'').next())
        {
            Some(nonce) => self.body.replace(nonce, "NONCE"),
            None => self.body.clone(),
        };
        const STATE: &str = "__RESOLVED_RESOURCES[0] = \"";
        let Some(start) = body.find(STATE).map(|at| at + STATE.len()) else {
            return body;
        };
        let end = start + body[start..].find('"').expect("the state's closing quote");
        use base64::Engine;
        use codee::Decoder;
        let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(&body[start..end])
            .expect("the page state is base64");
        let state: app::PageState = codee::binary::PostcardCodec::decode(&bytes)
            .expect("the page state is a PageState in postcard");
        let json = serde_json::to_string(&state).expect("a page state is JSON");
        format!("{}{json}{}", &body[..start], &body[end..])
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }

    /// The text of the page's `role="alert"` element.
    pub fn alert(&self) -> Option<String> {
        let start = self.body.find("role=\"alert\"")?;
        let text_start = start + self.body[start..].find('>')? + 1;
        let text_end = text_start + self.body[text_start..].find('<')?;
        Some(self.body[text_start..text_end].to_owned())
    }
}

/// The value of the sample `series` (name and labels exactly as exposed, e.g.
/// `banlieue_sign_ins_total{result="success"}`) in a `/metrics` exposition.
pub fn sample(exposition: &str, series: &str) -> Option<f64> {
    exposition.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        value.split(' ').next()?.parse().ok()
    })
}

/// `application/x-www-form-urlencoded` encoding of `fields`.
pub fn form(fields: &[(&str, &str)]) -> String {
    fields
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                percent_encoding::utf8_percent_encode(k, percent_encoding::NON_ALPHANUMERIC),
                percent_encoding::utf8_percent_encode(v, percent_encoding::NON_ALPHANUMERIC)
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// A same-origin form post, as a browser sends it, from 127.0.0.1.
pub fn post_form(path: &str, body: impl Into<Body>, cookie: Option<&str>) -> Request<Body> {
    post_form_from(path, body, cookie, IpAddr::from([127, 0, 0, 1]))
}

pub fn post_form_from(
    path: &str,
    body: impl Into<Body>,
    cookie: Option<&str>,
    ip: IpAddr,
) -> Request<Body> {
    let mut builder = Request::post(path)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::ORIGIN, ORIGIN)
        .header("sec-fetch-site", "same-origin");
    if let Some(cookie) = cookie {
        builder = builder.header(header::COOKIE, cookie);
    }
    let mut request = builder.body(body.into()).unwrap();
    request
        .extensions_mut()
        .insert(ConnectInfo(SocketAddr::new(ip, 40000)));
    request
}

pub fn get(path: &str, cookie: Option<&str>) -> Request<Body> {
    let mut builder = Request::get(path);
    if let Some(cookie) = cookie {
        builder = builder.header(header::COOKIE, cookie);
    }
    builder.body(Body::empty()).unwrap()
}
