//! What the fuzz targets share: the form parser's own properties, the RFC 6749 text rule,
//! and a real issuer on a throw-away SQLite store (one per fuzzing process).

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use banlieue_domain::form::parse_form;
use banlieue_domain::{RoleName, Roles, UserName};
use banlieue_identity::oidc::{
    AuthorizationRequest, CLI_CLIENT_ID, CONSOLE_AUDIENCE, Issuer, IssuerConfig, KEK_LEN,
    KeyEncryption, KeyPolicy,
};
use banlieue_identity::{Accounts, PasswordHasher, ThrottlePolicy};
use banlieue_store::{AuditEvent, NewUser, Store};
use time::OffsetDateTime;

/// Where the fixture's requests come from.
pub const SOURCE: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// The issuer URL of the fixture.
pub const ISSUER_URL: &str = "https://console.example.org";

/// RFC 6749 §4.1.2.1 and §5.2: `error_description` "MUST NOT include characters outside
/// the set %x20-21 / %x23-5B / %x5D-7E".
pub fn is_oauth_text(text: &str) -> bool {
    text.bytes()
        .all(|b| matches!(b, 0x20..=0x21 | 0x23..=0x5B | 0x5D..=0x7E))
}

/// The body as the console reads a form ([`parse_form`]), checked against the WHATWG
/// reference (the `url` crate, which replaces invalid UTF-8 instead of refusing it) and
/// for a lossless round trip through the encoder. `None` when the console refuses it.
pub fn checked_form(body: &[u8]) -> Option<Vec<(String, String)>> {
    let reference: Vec<(String, String)> = url::form_urlencoded::parse(body)
        .map(|(n, v)| (n.into_owned(), v.into_owned()))
        .collect();
    match parse_form(body) {
        Ok(fields) => {
            assert_eq!(fields, reference, "the strict parse differs from WHATWG's");
            let encoded = url::form_urlencoded::Serializer::new(String::new())
                .extend_pairs(&fields)
                .finish();
            let again = parse_form(encoded.as_bytes()).expect("an encoded form parses");
            assert_eq!(again, fields, "a form does not survive its own encoding");
            Some(fields)
        }
        Err(_) => {
            assert!(
                reference
                    .iter()
                    .any(|(n, v)| n.contains('\u{fffd}') || v.contains('\u{fffd}')),
                "a form refused as invalid UTF-8 decodes cleanly under WHATWG: {reference:?}"
            );
            None
        }
    }
}

/// A real issuer on SQLite with one signing key, the user `alice` (viewer) and an ID token
/// for the console's audience that she was issued through the code flow at [`Self::now`].
pub struct Fixture {
    runtime: tokio::runtime::Runtime,
    pub issuer: Issuer,
    /// The time every call is made at: the fixture's token stays valid however long the
    /// fuzzer runs, and runs are reproducible.
    pub now: OffsetDateTime,
    /// alice's ID token (`aud` `banlieue-console`, `banlieue-cli`).
    pub id_token: String,
    /// The `kid` of the signing key.
    pub kid: String,
    _dir: TempDir,
}

impl Fixture {
    /// The process's fixture, made on first use.
    pub fn get() -> &'static Fixture {
        static FIXTURE: OnceLock<Fixture> = OnceLock::new();
        FIXTURE.get_or_init(Fixture::new)
    }

    /// Runs `future` to completion on the fixture's runtime.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    fn new() -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let dir = TempDir::new();
        let url = format!("sqlite://{}/fuzz.db", dir.0.display());
        let (issuer, now, id_token) = runtime.block_on(async {
            let store = Store::open(&url).await.expect("the fixture's database");
            let new = NewUser {
                name: UserName::parse("alice").unwrap(),
                display_name: "Alice".into(),
                email: String::new(),
                roles: Roles::new(vec![RoleName::parse("viewer").unwrap()]).unwrap(),
                must_change_password: false,
            };
            // Nobody signs in: the password hash is never checked.
            let user = store
                .create_user(
                    &new,
                    "$argon2id$v=19$m=1024,t=1,p=1$c2FsdA$aGFzaA",
                    OffsetDateTime::now_utc(),
                    &AuditEvent::now(
                        "-",
                        "user.create",
                        "alice",
                        IpAddr::V4(Ipv4Addr::LOCALHOST),
                        "success",
                        "",
                    ),
                )
                .await
                .expect("alice");
            let accounts = Arc::new(Accounts::new(
                store,
                PasswordHasher::rfc9106_second_recommendation(),
                ThrottlePolicy::default(),
            ));
            let issuer = Issuer::new(
                IssuerConfig::new(ISSUER_URL),
                KeyPolicy::default(),
                Arc::new(KeyEncryption::new(&[7; KEK_LEN], None)),
                accounts,
            );
            let now = OffsetDateTime::now_utc();
            issuer.keys().maintain(now).await.expect("a signing key");
            let id_token = code_flow(&issuer, &user, now).await;
            (issuer, now, id_token)
        });
        let kid = header_kid(&id_token);
        Self {
            runtime,
            issuer,
            now,
            id_token,
            kid,
            _dir: dir,
        }
    }
}

/// The RFC 7636 Appendix B verifier and its S256 challenge.
const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

async fn code_flow(
    issuer: &Issuer,
    user: &banlieue_store::UserRecord,
    now: OffsetDateTime,
) -> String {
    let redirect_uri = "http://127.0.0.1:53124/callback";
    let params: Vec<(String, String)> = [
        ("response_type", "code"),
        ("client_id", CLI_CLIENT_ID),
        ("redirect_uri", redirect_uri),
        ("scope", "openid"),
        ("code_challenge", CHALLENGE),
        ("code_challenge_method", "S256"),
        ("audience", CONSOLE_AUDIENCE),
    ]
    .iter()
    .map(|(n, v)| (n.to_string(), v.to_string()))
    .collect();
    let request = AuthorizationRequest::parse(&params).expect("a valid authorization request");
    let location = issuer
        .issue_code(&request, user, now, now)
        .await
        .expect("a code");
    let code = url::Url::parse(&location)
        .unwrap()
        .query_pairs()
        .find(|(n, _)| n == "code")
        .map(|(_, v)| v.into_owned())
        .expect("the redirect carries the code");
    let form: Vec<(String, String)> = [
        ("grant_type", "authorization_code"),
        ("client_id", CLI_CLIENT_ID),
        ("code", code.as_str()),
        ("redirect_uri", redirect_uri),
        ("code_verifier", VERIFIER),
    ]
    .iter()
    .map(|(n, v)| (n.to_string(), v.to_string()))
    .collect();
    issuer
        .token(&form, SOURCE, now)
        .await
        .expect("the code is redeemed")
        .id_token
}

fn header_kid(token: &str) -> String {
    use base64::Engine;
    let header = token.split('.').next().unwrap();
    let header = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header)
        .unwrap();
    let header: serde_json::Value = serde_json::from_slice(&header).unwrap();
    header["kid"].as_str().unwrap().to_owned()
}

/// A directory of this process under the temporary directory; the ones of processes that
/// have ended (a fuzzer exits without running destructors) are removed at start.
struct TempDir(PathBuf);

impl TempDir {
    const PREFIX: &str = "banlieue-fuzz-";

    fn new() -> Self {
        let tmp = std::env::temp_dir();
        if let Ok(entries) = std::fs::read_dir(&tmp) {
            for entry in entries.flatten() {
                let name = entry.file_name();
                let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(Self::PREFIX)) else {
                    continue;
                };
                if !PathBuf::from(format!("/proc/{pid}")).exists() {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
        let dir = tmp.join(format!("{}{}", Self::PREFIX, std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).expect("the fixture's directory");
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
