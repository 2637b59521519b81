//! Identity providers for the verifier's tests: npm `oidc-provider` processes (real
//! providers, real ID tokens) and a hand-made JWK Set server for what no real provider
//! would sign.

#![allow(dead_code)] // each test binary uses part of it

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

/// The client id every test provider knows (and the tenants' audience).
pub const CLIENT_ID: &str = "banlieue-console";
const REDIRECT_URI: &str = "http://127.0.0.1:9/oidc/tenant-callback";

/// One npm `oidc-provider` on loopback.
pub struct Idp {
    pub issuer: String,
    pub port: u16,
    config: PathBuf,
    child: tokio::process::Child,
}

fn script() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/idp");
    assert!(
        dir.join("node_modules/oidc-provider").is_dir(),
        "npm oidc-provider is not installed: run `npm ci` in {} (make test does)",
        dir.display()
    );
    dir.join("provider.mjs")
}

impl Idp {
    /// A provider on `port` (0: any) signing with a fresh key `kid`, whose accounts (by
    /// `login_hint`) carry `accounts`' claims. Its files go in `dir`.
    pub async fn start(dir: &Path, name: &str, port: u16, kid: &str, accounts: Value) -> Self {
        let config = dir.join(format!("{name}.json"));
        std::fs::write(
            &config,
            json!({
                "port": port, "kid": kid, "clientId": CLIENT_ID,
                "redirectUri": REDIRECT_URI, "accounts": accounts,
            })
            .to_string(),
        )
        .unwrap();
        Self::spawn(config).await
    }

    async fn spawn(config: PathBuf) -> Self {
        let mut child = tokio::process::Command::new("node")
            .arg(script())
            .arg(&config)
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("node runs");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("oidc-provider starts within 20 s")
            .unwrap()
            .expect("oidc-provider prints `ready`");
        let issuer = ready
            .strip_prefix("ready ")
            .expect("`ready <issuer>`")
            .to_owned();
        let port = url::Url::parse(&issuer).unwrap().port().unwrap();
        // Drained, so that a later line does not kill the provider with EPIPE.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self {
            issuer,
            port,
            config,
            child,
        }
    }

    /// Restarts this provider on its port with a new key `kid`: the old key withdrawn.
    pub async fn rotate(&mut self, kid: &str) {
        self.stop().await;
        let mut config: Value =
            serde_json::from_str(&std::fs::read_to_string(&self.config).unwrap()).unwrap();
        config["port"] = json!(self.port);
        config["kid"] = json!(kid);
        std::fs::write(&self.config, config.to_string()).unwrap();
        *self = Self::spawn(self.config.clone()).await;
    }

    /// Stops the process.
    pub async fn stop(&mut self) {
        let _ = self.child.kill().await;
    }

    /// An ID token for the account `login_hint`, through the real authorization code +
    /// PKCE flow: `/auth`, the interaction that signs the account in, the code, `/token`.
    pub async fn id_token(&self, login_hint: &str) -> String {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let verifier = random_text(32);
        let challenge = URL_SAFE_NO_PAD.encode(aws_lc_rs::digest::digest(
            &aws_lc_rs::digest::SHA256,
            verifier.as_bytes(),
        ));
        let state = random_text(12);
        let mut url = url::Url::parse(&format!("{}/auth", self.issuer)).unwrap();
        url.query_pairs_mut()
            .append_pair("client_id", CLIENT_ID)
            .append_pair("response_type", "code")
            .append_pair("scope", "openid")
            .append_pair("redirect_uri", REDIRECT_URI)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", &state)
            .append_pair("nonce", &random_text(12))
            .append_pair("login_hint", login_hint);
        let mut cookies: Vec<String> = Vec::new();
        for _ in 0..10 {
            let response = http
                .get(url.clone())
                .header(reqwest::header::COOKIE, cookies.join("; "))
                .send()
                .await
                .unwrap();
            for set in response.headers().get_all(reqwest::header::SET_COOKIE) {
                let pair = set.to_str().unwrap().split(';').next().unwrap().to_owned();
                cookies.push(pair);
            }
            assert!(
                response.status().is_redirection(),
                "{url} answered {}",
                response.status()
            );
            let next = response.headers()[reqwest::header::LOCATION]
                .to_str()
                .unwrap()
                .to_owned();
            if let Some(query) = next.strip_prefix(&format!("{REDIRECT_URI}?")) {
                let code = url::form_urlencoded::parse(query.as_bytes())
                    .find(|(k, _)| k == "code")
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_else(|| panic!("no code in {next}"));
                let tokens: Value = http
                    .post(format!("{}/token", self.issuer))
                    .form(&[
                        ("grant_type", "authorization_code"),
                        ("code", &code),
                        ("redirect_uri", REDIRECT_URI),
                        ("client_id", CLIENT_ID),
                        ("code_verifier", &verifier),
                    ])
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                return tokens["id_token"]
                    .as_str()
                    .unwrap_or_else(|| panic!("no ID token: {tokens}"))
                    .to_owned();
            }
            url = url.join(&next).unwrap();
        }
        panic!("oidc-provider did not come back to the client within 10 hops")
    }
}

pub fn random_text(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    aws_lc_rs::rand::fill(&mut buf).unwrap();
    URL_SAFE_NO_PAD.encode(buf)
}

/// An ES256 key pair made here, for hand-made tokens.
pub struct HandKey {
    pub kid: String,
    pair: EcdsaKeyPair,
    encoding: jsonwebtoken::EncodingKey,
}

impl HandKey {
    pub fn new(kid: &str) -> Self {
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .unwrap();
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
        Self {
            kid: kid.to_owned(),
            encoding: jsonwebtoken::EncodingKey::from_ec_der(pkcs8.as_ref()),
            pair,
        }
    }

    /// The public key as a JWK.
    pub fn jwk(&self) -> Value {
        let point = self.pair.public_key().as_ref();
        json!({
            "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": self.kid,
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
        })
    }

    /// A token of `claims` (with `exp` an hour ahead when they have none), with header
    /// `typ` and this key's kid unless `kid` overrides it.
    pub fn sign(&self, claims: Value, typ: Option<&str>, kid: Option<&str>) -> String {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.typ = typ.map(str::to_owned);
        header.kid = Some(kid.unwrap_or(&self.kid).to_owned());
        let mut claims = claims;
        if claims.get("exp").is_none() {
            claims["exp"] = json!(jsonwebtoken::get_current_timestamp() + 3600);
        }
        jsonwebtoken::encode(&header, &claims, &self.encoding).unwrap()
    }
}

/// A JWK Set server made here: `/jwks` (counting fetches), `/redirect` (to a URL set by
/// the test), over http or https with a certificate of its own.
pub struct KeyServer {
    pub base: String,
    pub keys: Arc<Mutex<Value>>,
    pub fetches: Arc<AtomicU64>,
    pub redirect_to: Arc<Mutex<String>>,
    /// The PEM certificate a client must trust (https only).
    pub certificate: Option<String>,
}

impl KeyServer {
    pub async fn start(keys: Vec<Value>, tls: bool) -> Self {
        use axum::response::IntoResponse;
        let keys = Arc::new(Mutex::new(json!({ "keys": keys })));
        let fetches = Arc::new(AtomicU64::new(0));
        let redirect_to = Arc::new(Mutex::new(String::new()));
        let router = axum::Router::new()
            .route(
                "/jwks",
                axum::routing::get({
                    let (keys, fetches) = (keys.clone(), fetches.clone());
                    move || async move {
                        fetches.fetch_add(1, Ordering::SeqCst);
                        axum::Json(keys.lock().unwrap().clone())
                    }
                }),
            )
            .route(
                "/redirect",
                axum::routing::get({
                    let to = redirect_to.clone();
                    move || async move {
                        axum::response::Redirect::temporary(&to.lock().unwrap().clone())
                            .into_response()
                    }
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        if !tls {
            tokio::spawn(async move { axum::serve(listener, router).await });
            return Self {
                base: format!("http://127.0.0.1:{port}"),
                keys,
                fetches,
                redirect_to,
                certificate: None,
            };
        }
        let certs = kube_emulator::tls::generate().unwrap();
        let listener = kube_emulator::tls::TlsListener::new(
            listener,
            kube_emulator::tls::acceptor(&certs).unwrap(),
        )
        .unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await });
        let certificate = certs.ca_pem;
        Self {
            base: format!("https://127.0.0.1:{port}"),
            keys,
            fetches,
            redirect_to,
            certificate: Some(certificate),
        }
    }

    pub fn fetches(&self) -> u64 {
        self.fetches.load(Ordering::SeqCst)
    }
}

/// A ConsoleTenant document.
pub fn tenant(id: &str, issuer: &str, jwks_url: Option<&str>, enabled: bool) -> Value {
    let mut oidc = json!({
        "issuer": issuer,
        "audience": CLIENT_ID,
        "tenantClaim": "tenant",
        "usernameClaim": "preferred_username",
        "rolesClaim": "roles",
    });
    if let Some(url) = jwks_url {
        oidc["jwksURL"] = json!(url);
    }
    json!({
        "apiVersion": "console.banlieue.io/v1alpha1",
        "kind": "ConsoleTenant",
        "metadata": {"name": id},
        "spec": {
            "tenantId": id,
            "enabled": enabled,
            "oidc": oidc,
            "defaultRole": "viewer",
            "allowedRoles": ["viewer", "developer"],
            "namespaces": [format!("{id}-sandboxes")],
        },
    })
}

/// Writes `documents` to `path` as a YAML stream.
pub fn write_tenants(path: &Path, documents: &[Value]) {
    let stream: Vec<String> = documents
        .iter()
        .map(|d| serde_yaml::to_string(d).unwrap())
        .collect();
    std::fs::write(path, stream.join("---\n")).unwrap();
}
