//! The OIDC issuer through the router: the authorization page, codes, tokens, refresh
//! rotation and revocation, and every refusal SPEC §4 and issue 4 name.

mod support;

use std::collections::HashMap;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use banlieue_identity::oidc::BearerError;
use serde_json::Value;
use support::{TestApp, form, get, post_form, sample};
use time::OffsetDateTime;

// RFC 7636 Appendix B.
const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
const REDIRECT: &str = "http://127.0.0.1:53124/callback";
const PASSWORD: &str = "correct horse battery";

fn authorize_params(overrides: &[(&str, Option<&str>)]) -> Vec<(String, String)> {
    let mut params: Vec<(&str, Option<&str>)> = vec![
        ("response_type", Some("code")),
        ("client_id", Some("banlieue-cli")),
        ("redirect_uri", Some(REDIRECT)),
        ("scope", Some("openid offline_access")),
        ("state", Some("st")),
        ("nonce", Some("nn")),
        ("code_challenge", Some(CHALLENGE)),
        ("code_challenge_method", Some("S256")),
    ];
    for (name, value) in overrides {
        params.retain(|(n, _)| n != name);
        params.push((name, *value));
    }
    params
        .into_iter()
        .filter_map(|(n, v)| v.map(|v| (n.to_owned(), v.to_owned())))
        .collect()
}

fn encode(pairs: &[(String, String)]) -> String {
    let borrowed: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    form(&borrowed)
}

fn query_of(location: &str) -> HashMap<String, String> {
    let url = url::Url::parse(location).unwrap();
    url.query_pairs().into_owned().collect()
}

/// A POST from a non-browser client (no Origin, no fetch metadata), as kubectl's plugin
/// sends to the token endpoint.
fn client_post(path: &str, fields: &[(&str, &str)]) -> Request<Body> {
    Request::post(path)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(form(fields)))
        .unwrap()
}

struct Fixture {
    app: TestApp,
    cookie: String,
}

impl Fixture {
    async fn new() -> Self {
        Self::on(TestApp::new().await).await
    }

    /// alice, a developer, signed in on `app`.
    async fn on(app: TestApp) -> Self {
        app.create_user("alice", PASSWORD, &["developer"], false)
            .await;
        let cookie = app.sign_in("alice", PASSWORD).await;
        Self { app, cookie }
    }

    /// Confirms an authorization as the signed-in alice; returns the redirect.
    async fn confirm(&self, params: &[(String, String)]) -> String {
        let mut fields = params.to_vec();
        fields.push(("decision".into(), "allow".into()));
        let response = self
            .app
            .send(post_form(
                "/oidc/authorize",
                encode(&fields),
                Some(&self.cookie),
            ))
            .await;
        assert_eq!(response.status, StatusCode::SEE_OTHER, "{}", response.body);
        response.location().unwrap().to_owned()
    }

    async fn code(&self, params: &[(String, String)]) -> String {
        query_of(&self.confirm(params).await)["code"].clone()
    }

    async fn exchange(&self, code: &str, verifier: Option<&str>) -> (StatusCode, Value) {
        let mut fields = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", REDIRECT),
            ("client_id", "banlieue-cli"),
        ];
        fields.extend(verifier.map(|v| ("code_verifier", v)));
        self.token(&fields).await
    }

    async fn token(&self, fields: &[(&str, &str)]) -> (StatusCode, Value) {
        let response = self.app.send(client_post("/oidc/token", fields)).await;
        (
            response.status,
            serde_json::from_str(&response.body).unwrap(),
        )
    }

    async fn tokens(&self) -> Value {
        let code = self.code(&authorize_params(&[])).await;
        let (status, body) = self.exchange(&code, Some(VERIFIER)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    }

    async fn refresh(&self, refresh_token: &str) -> (StatusCode, Value) {
        self.token(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
            ("client_id", "banlieue-cli"),
        ])
        .await
    }
}

fn claims(jwt: &str) -> Value {
    use base64::Engine;
    let payload = jwt.split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

fn error_of(body: &Value) -> &str {
    body["error"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn discovery_and_jwks_describe_the_issuer_uncached() {
    let app = TestApp::new().await;
    let discovery = app
        .send(get("/.well-known/openid-configuration", None))
        .await;
    assert_eq!(discovery.status, StatusCode::OK);
    assert_eq!(
        discovery.header("cache-control").as_deref(),
        Some("no-cache")
    );
    let doc: Value = serde_json::from_str(&discovery.body).unwrap();
    assert_eq!(doc["issuer"], "http://127.0.0.1:3000");
    assert_eq!(doc["token_endpoint"], "http://127.0.0.1:3000/oidc/token");
    assert_eq!(
        doc["code_challenge_methods_supported"],
        serde_json::json!(["S256"])
    );
    let jwks = app.send(get("/oidc/jwks", None)).await;
    assert_eq!(jwks.header("cache-control").as_deref(), Some("no-cache"));
    let keys: Value = serde_json::from_str(&jwks.body).unwrap();
    let key = &keys["keys"][0];
    assert_eq!(key["kty"], "RSA");
    assert_eq!(key["alg"], "RS256");
    assert!(key.get("d").is_none(), "no private part in the JWKS");
}

#[tokio::test]
async fn signed_out_people_see_the_sign_in_card_and_get_a_code_after_signing_in() {
    let app = TestApp::new().await;
    app.create_user("bob", PASSWORD, &["viewer"], false).await;
    let query = encode(&authorize_params(&[]));
    let page = app
        .send(get(&format!("/oidc/authorize?{query}"), None))
        .await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("name=\"password\""), "sign-in card");
    assert!(
        page.body.contains(CHALLENGE),
        "the request is carried in the form"
    );
    let csp = page.header("content-security-policy").unwrap();
    assert!(
        csp.contains("form-action 'self' http://127.0.0.1:53124"),
        "{csp}"
    );

    let mut fields = authorize_params(&[]);
    fields.push(("user_name".into(), "bob".into()));
    fields.push(("password".into(), "wrong password!".into()));
    let refused = app
        .send(post_form("/oidc/authorize", encode(&fields), None))
        .await;
    assert_eq!(refused.status, StatusCode::OK);
    assert!(refused.alert().is_some());
    assert!(
        refused.body.contains("value=\"bob\""),
        "the user name is kept"
    );

    fields.pop();
    fields.push(("password".into(), PASSWORD.into()));
    let signed_in = app
        .send(post_form("/oidc/authorize", encode(&fields), None))
        .await;
    assert_eq!(signed_in.status, StatusCode::SEE_OTHER);
    let location = signed_in.location().unwrap();
    assert!(location.starts_with(REDIRECT), "{location}");
    let query = query_of(location);
    assert_eq!(query["state"], "st");
    assert_eq!(query["iss"], "http://127.0.0.1:3000");
    assert_eq!(query["code"].len(), 43);
    assert!(
        signed_in.session_cookie().is_some(),
        "signed in to the console too"
    );
}

#[tokio::test]
async fn signed_in_people_confirm_or_cancel() {
    let fx = Fixture::new().await;
    let query = encode(&authorize_params(&[]));
    let page = fx
        .app
        .send(get(&format!("/oidc/authorize?{query}"), Some(&fx.cookie)))
        .await;
    assert!(page.body.contains("Continue as alice"), "{}", page.body);
    assert!(!page.body.contains("name=\"password\""));

    let mut fields = authorize_params(&[]);
    fields.push(("decision".into(), "deny".into()));
    let cancelled = fx
        .app
        .send(post_form(
            "/oidc/authorize",
            encode(&fields),
            Some(&fx.cookie),
        ))
        .await;
    let query = query_of(cancelled.location().unwrap());
    assert_eq!(query["error"], "access_denied");
    assert_eq!(query["state"], "st");
}

#[tokio::test]
async fn a_cross_site_confirmation_is_refused() {
    let fx = Fixture::new().await;
    let mut fields = authorize_params(&[]);
    fields.push(("decision".into(), "allow".into()));
    let mut request = post_form("/oidc/authorize", encode(&fields), Some(&fx.cookie));
    request
        .headers_mut()
        .insert("sec-fetch-site", "cross-site".parse().unwrap());
    let response = fx.app.send(request).await;
    assert_eq!(response.status, StatusCode::FORBIDDEN);
    assert!(response.location().is_none());
}

#[tokio::test]
async fn the_code_grant_returns_a_signed_id_token_and_a_refresh_token() {
    let fx = Fixture::new().await;
    let body = fx.tokens().await;
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["expires_in"], 300);
    let id = claims(body["id_token"].as_str().unwrap());
    assert_eq!(id["iss"], "http://127.0.0.1:3000");
    assert_eq!(id["sub"], "alice");
    assert_eq!(id["aud"], serde_json::json!(["kubernetes", "banlieue-cli"]));
    assert_eq!(id["azp"], "banlieue-cli");
    assert_eq!(id["nonce"], "nn");
    assert_eq!(id["groups"], serde_json::json!(["developer"]));
    assert_eq!(
        id["exp"].as_i64().unwrap() - id["iat"].as_i64().unwrap(),
        300
    );
    assert!(body["refresh_token"].is_string());

    let events = fx.app.store().recent_audit(20).await.unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.action == "oidc.token.issue" && e.actor == "alice")
    );
}

#[tokio::test]
async fn the_console_audience_is_carried_into_refresh() {
    let fx = Fixture::new().await;
    let code = fx
        .code(&authorize_params(&[("audience", Some("banlieue-console"))]))
        .await;
    let (_, body) = fx.exchange(&code, Some(VERIFIER)).await;
    let (status, refreshed) = fx.refresh(body["refresh_token"].as_str().unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    let id = claims(refreshed["id_token"].as_str().unwrap());
    assert_eq!(id["aud"][0], "banlieue-console");
    assert!(id.get("nonce").is_none());
}

#[tokio::test]
async fn codes_are_refused_when_pkce_client_or_redirect_do_not_match() {
    let fx = Fixture::new().await;
    let cases: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("missing verifier", vec![]),
        (
            "wrong verifier",
            vec![(
                "code_verifier",
                "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXl",
            )],
        ),
        (
            "the challenge as verifier",
            vec![("code_verifier", CHALLENGE)],
        ),
        (
            "other redirect port",
            vec![
                ("code_verifier", VERIFIER),
                ("redirect_uri", "http://127.0.0.1:53125/callback"),
            ],
        ),
        (
            "other client",
            vec![
                ("code_verifier", VERIFIER),
                ("client_id", "banlieue-console"),
            ],
        ),
    ];
    for (case, overrides) in cases {
        let code = fx.code(&authorize_params(&[])).await;
        let mut fields: HashMap<&str, &str> = HashMap::from([
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", REDIRECT),
            ("client_id", "banlieue-cli"),
        ]);
        fields.extend(overrides);
        let fields: Vec<(&str, &str)> = fields.into_iter().collect();
        let (status, body) = fx.token(&fields).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{case}: {body}");
        assert_eq!(error_of(&body), "invalid_grant", "{case}");
        // Whoever saw the code but could not prove to be its client did not burn it.
        let (status, body) = fx.exchange(&code, Some(VERIFIER)).await;
        assert_eq!(
            status,
            StatusCode::OK,
            "{case}: the client still redeems: {body}"
        );
        assert!(body["refresh_token"].is_string(), "{case}: {body}");
    }
}

#[tokio::test]
async fn a_code_works_once_and_its_replay_revokes_what_it_issued() {
    let fx = Fixture::new().await;
    let code = fx.code(&authorize_params(&[])).await;
    let (status, first) = fx.exchange(&code, Some(VERIFIER)).await;
    assert_eq!(status, StatusCode::OK);
    let (status, replay) = fx.exchange(&code, Some(VERIFIER)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(error_of(&replay), "invalid_grant");
    let (_, refreshed) = fx.refresh(first["refresh_token"].as_str().unwrap()).await;
    assert_eq!(
        error_of(&refreshed),
        "invalid_grant",
        "the family died with the replay"
    );
}

#[tokio::test]
async fn an_expired_code_is_refused() {
    let fx = Fixture::new().await;
    let alice = fx.app.user("alice").await;
    let now = OffsetDateTime::now_utc();
    // A code issued 61 s ago, stored as the issuer stores codes (SHA-256, hex).
    let code = "an-aged-code";
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, code.as_bytes());
    let record = banlieue_store::AuthorizationCodeRecord {
        code_hash: digest.as_ref().iter().map(|b| format!("{b:02x}")).collect(),
        client_id: "banlieue-cli".into(),
        redirect_uri: REDIRECT.into(),
        code_challenge: CHALLENGE.into(),
        nonce: None,
        audience: "kubernetes".into(),
        scope: "openid".into(),
        user_id: alice.id,
        auth_time: now - time::Duration::seconds(61),
        expires_at: now - time::Duration::seconds(1),
    };
    fx.app
        .store()
        .insert_authorization_code(&record)
        .await
        .unwrap();
    let (status, body) = fx.exchange(code, Some(VERIFIER)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body["error_description"],
        "the authorization code has expired"
    );
}

#[tokio::test]
async fn authorization_requests_that_cannot_be_trusted_are_shown_not_redirected() {
    let fx = Fixture::new().await;
    let untrusted = [
        vec![("client_id", Some("unknown-client"))],
        vec![("redirect_uri", Some("http://localhost:53124/callback"))],
        vec![("redirect_uri", Some("http://[::1]:53124/callback"))],
        vec![("redirect_uri", Some("http://127.0.0.1:53124/other"))],
        vec![(
            "redirect_uri",
            Some("http://127.0.0.1.evil.test:53124/callback"),
        )],
        vec![("redirect_uri", Some("https://127.0.0.1:53124/callback"))],
        vec![("redirect_uri", Some("http://evil.test/callback"))],
        // The console's own client has no redirect URI registered.
        vec![("client_id", Some("banlieue-console"))],
        vec![
            ("client_id", Some("banlieue-console")),
            ("redirect_uri", Some("http://127.0.0.1:3000/oidc/callback")),
            ("audience", Some("banlieue-console")),
        ],
    ];
    for overrides in untrusted {
        let query = encode(&authorize_params(&overrides));
        let page = fx
            .app
            .send(get(&format!("/oidc/authorize?{query}"), Some(&fx.cookie)))
            .await;
        assert_eq!(page.status, StatusCode::BAD_REQUEST, "{overrides:?}");
        assert!(page.location().is_none());
        assert!(page.body.contains("cannot be used"), "{}", page.body);
    }
}

#[tokio::test]
async fn pkce_downgrades_are_refused_at_authorize() {
    let fx = Fixture::new().await;
    for overrides in [
        vec![("code_challenge", None), ("code_challenge_method", None)],
        vec![("code_challenge_method", None)],
        vec![("code_challenge_method", Some("plain"))],
    ] {
        let query = encode(&authorize_params(&overrides));
        let page = fx
            .app
            .send(get(&format!("/oidc/authorize?{query}"), Some(&fx.cookie)))
            .await;
        assert_eq!(page.status, StatusCode::SEE_OTHER, "{overrides:?}");
        let query = query_of(page.location().unwrap());
        assert_eq!(query["error"], "invalid_request", "{overrides:?}");
        assert_eq!(query["state"], "st");
    }
}

#[tokio::test]
async fn refresh_rotates_with_a_short_grace_and_reuse_revokes_the_family() {
    let fx = Fixture::new().await;
    let first = fx.tokens().await;
    let r1 = first["refresh_token"].as_str().unwrap().to_owned();
    let (status, second) = fx.refresh(&r1).await;
    assert_eq!(status, StatusCode::OK);
    let r2 = second["refresh_token"].as_str().unwrap().to_owned();
    assert_ne!(r1, r2);
    // A parallel run presenting r1 again within the grace gets the same successor.
    let (status, again) = fx.refresh(&r1).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["refresh_token"], r2.as_str());
    // r2 rotates to r3; now r1 is no longer the immediately previous token.
    let (_, third) = fx.refresh(&r2).await;
    let r3 = third["refresh_token"].as_str().unwrap().to_owned();
    let (status, reuse) = fx.refresh(&r1).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(error_of(&reuse), "invalid_grant");
    let (_, after) = fx.refresh(&r3).await;
    assert_eq!(
        error_of(&after),
        "invalid_grant",
        "the whole family is revoked"
    );
    let events = fx.app.store().recent_audit(50).await.unwrap();
    assert!(events.iter().any(|e| e.action == "oidc.refresh.reuse"));
    assert!(events.iter().any(|e| e.action == "oidc.token.refresh"));
}

#[tokio::test]
async fn refresh_dies_with_disable_password_change_and_sign_out_everywhere() {
    let fx = Fixture::new().await;
    let alice = fx.app.user("alice").await;

    let tokens = fx.tokens().await;
    fx.app
        .store()
        .set_disabled(alice.id, true, OffsetDateTime::now_utc())
        .await
        .unwrap();
    let (_, body) = fx.refresh(tokens["refresh_token"].as_str().unwrap()).await;
    assert_eq!(error_of(&body), "invalid_grant", "after disable");
    let events = fx.app.store().recent_audit(20).await.unwrap();
    assert!(
        events.iter().any(|e| e.action == "oidc.token.refresh"
            && e.result == "refused"
            && e.actor == "alice"),
        "{events:?}"
    );
    fx.app
        .store()
        .set_disabled(alice.id, false, OffsetDateTime::now_utc())
        .await
        .unwrap();

    let fx = Fixture::new().await;
    let alice = fx.app.user("alice").await;
    let tokens = fx.tokens().await;
    fx.app
        .store()
        .revoke_user_sessions(
            alice.id,
            OffsetDateTime::now_utc() + time::Duration::seconds(1),
            &banlieue_store::AuditEvent::now(
                "root",
                "user.sessions-revoke",
                "alice",
                std::net::Ipv4Addr::LOCALHOST.into(),
                "success",
                "",
            ),
        )
        .await
        .unwrap();
    let (_, body) = fx.refresh(tokens["refresh_token"].as_str().unwrap()).await;
    assert_eq!(error_of(&body), "invalid_grant", "after not_before moved");

    // Disabled and enabled again before any refresh: what was issued before stays dead.
    let fx = Fixture::new().await;
    let alice = fx.app.user("alice").await;
    let tokens = fx.tokens().await;
    for disabled in [true, false] {
        fx.app
            .store()
            .set_disabled(alice.id, disabled, OffsetDateTime::now_utc())
            .await
            .unwrap();
    }
    let (_, body) = fx.refresh(tokens["refresh_token"].as_str().unwrap()).await;
    assert_eq!(error_of(&body), "invalid_grant", "after disable and enable");
}

/// The issuer remembers the tokens it issued and rotates them without reading them again;
/// every change since still counts, checked by the rotation's write.
#[tokio::test]
async fn a_remembered_refresh_token_still_sees_every_change() {
    let fx = Fixture::new().await;
    let store = fx.app.store();
    let now = OffsetDateTime::now_utc;
    let refresh_token = |body: &Value| body["refresh_token"].as_str().unwrap().to_owned();
    let (status, first) = fx.refresh(&refresh_token(&fx.tokens().await)).await;
    assert_eq!(status, StatusCode::OK, "{first}");

    let alice = fx.app.user("alice").await;
    let roles = banlieue_domain::Roles::new(vec![
        banlieue_domain::RoleName::parse("developer").unwrap(),
        banlieue_domain::RoleName::parse("viewer").unwrap(),
    ])
    .unwrap();
    store
        .update_user(
            alice.id,
            alice.version,
            &banlieue_store::UserUpdate {
                display_name: "Alice",
                email: "",
                roles: &roles,
            },
            now(),
            &[],
        )
        .await
        .unwrap();
    let (status, second) = fx.refresh(&refresh_token(&first)).await;
    assert_eq!(status, StatusCode::OK, "{second}");
    assert_eq!(
        claims(second["id_token"].as_str().unwrap())["groups"],
        serde_json::json!(["developer", "viewer"]),
        "roles changed since the last rotation reach the next ID token"
    );

    let revoked = fx
        .app
        .send(client_post(
            "/oidc/revoke",
            &[
                ("token", refresh_token(&first).as_str()),
                ("client_id", "banlieue-cli"),
            ],
        ))
        .await;
    assert_eq!(revoked.status, StatusCode::OK);
    let (_, body) = fx.refresh(&refresh_token(&second)).await;
    assert_eq!(
        error_of(&body),
        "invalid_grant",
        "after RFC 7009 revocation"
    );

    let (_, third) = fx.refresh(&refresh_token(&fx.tokens().await)).await;
    let alice = fx.app.user("alice").await;
    store.set_disabled(alice.id, true, now()).await.unwrap();
    let (_, body) = fx.refresh(&refresh_token(&third)).await;
    assert_eq!(error_of(&body), "invalid_grant", "after disable");
}

#[tokio::test]
async fn refresh_stops_at_the_absolute_lifetime() {
    let app = TestApp::with_args(&["--refresh-token-lifetime-hours", "1"]).await;
    app.create_user("alice", PASSWORD, &["developer"], false)
        .await;
    let cookie = app.sign_in("alice", PASSWORD).await;
    let fx = Fixture { app, cookie };
    let tokens = fx.tokens().await;
    let refresh = tokens["refresh_token"].as_str().unwrap();
    let (status, _) = fx.refresh(refresh).await;
    assert_eq!(status, StatusCode::OK);
    let later = OffsetDateTime::now_utc() + time::Duration::minutes(61);
    let rotated = {
        let (_, body) = fx.refresh(refresh).await; // grace: same successor
        body["refresh_token"].as_str().unwrap().to_owned()
    };
    let form = vec![
        ("grant_type".to_owned(), "refresh_token".to_owned()),
        ("refresh_token".to_owned(), rotated),
        ("client_id".to_owned(), "banlieue-cli".to_owned()),
    ];
    let error = fx
        .app
        .issuer
        .token(&form, "127.0.0.1".parse().unwrap(), later)
        .await
        .unwrap_err();
    assert_eq!(error.code.as_str(), "invalid_grant");
}

#[tokio::test]
async fn users_who_must_change_their_password_get_no_token_until_they_do() {
    let app = TestApp::new().await;
    app.create_user("carol", PASSWORD, &["developer"], true)
        .await;
    let mut fields = authorize_params(&[]);
    fields.push(("user_name".into(), "carol".into()));
    fields.push(("password".into(), PASSWORD.into()));
    let response = app
        .send(post_form("/oidc/authorize", encode(&fields), None))
        .await;
    assert_eq!(response.status, StatusCode::SEE_OTHER);
    let location = response.location().unwrap().to_owned();
    assert!(
        location.starts_with("/change-password?next=%2Foidc%2Fauthorize%3F"),
        "{location}"
    );
    let cookie = response.session_cookie().unwrap();

    let changed = app
        .send(post_form(
            &location,
            form(&[
                ("current_password", PASSWORD),
                ("new_password", "a brand new passphrase"),
                ("confirm_password", "a brand new passphrase"),
            ]),
            Some(&cookie),
        ))
        .await;
    assert_eq!(changed.status, StatusCode::SEE_OTHER, "{}", changed.body);
    let back = changed.location().unwrap();
    assert!(back.starts_with("/oidc/authorize?"), "{back}");
    let cookie = changed.session_cookie().unwrap();
    let page = app.send(get(back, Some(&cookie))).await;
    assert!(page.body.contains("Continue as carol"), "{}", page.body);
}

#[tokio::test]
async fn token_endpoint_errors_follow_rfc_6749() {
    let fx = Fixture::new().await;
    type Case<'a> = (Vec<(&'a str, &'a str)>, StatusCode, &'a str);
    let cases: Vec<Case> = vec![
        (
            vec![("grant_type", "password"), ("client_id", "banlieue-cli")],
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
        ),
        (
            vec![("grant_type", "authorization_code")],
            StatusCode::UNAUTHORIZED,
            "invalid_client",
        ),
        (
            vec![
                ("grant_type", "authorization_code"),
                ("client_id", "kubectl"),
            ],
            StatusCode::UNAUTHORIZED,
            "invalid_client",
        ),
        (
            vec![
                ("grant_type", "authorization_code"),
                ("client_id", "banlieue-cli"),
            ],
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            vec![
                ("grant_type", "refresh_token"),
                ("client_id", "banlieue-cli"),
                ("refresh_token", "garbage"),
            ],
            StatusCode::BAD_REQUEST,
            "invalid_grant",
        ),
        (
            vec![
                ("grant_type", "authorization_code"),
                ("grant_type", "refresh_token"),
                ("client_id", "banlieue-cli"),
            ],
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
    ];
    for (fields, status, error) in cases {
        let response = fx.app.send(client_post("/oidc/token", &fields)).await;
        assert_eq!(response.status, status, "{fields:?}: {}", response.body);
        assert_eq!(
            response.header("cache-control").as_deref(),
            Some("no-store")
        );
        let body: Value = serde_json::from_str(&response.body).unwrap();
        assert_eq!(error_of(&body), error, "{fields:?}");
    }
}

#[tokio::test]
async fn revocation_follows_rfc_7009() {
    let fx = Fixture::new().await;
    let tokens = fx.tokens().await;
    let refresh = tokens["refresh_token"].as_str().unwrap();

    let send = |fields: Vec<(&str, &str)>| fx.app.send(client_post("/oidc/revoke", &fields));
    let garbage = send(vec![("token", "garbage"), ("client_id", "banlieue-cli")]).await;
    assert_eq!(garbage.status, StatusCode::OK);
    assert!(garbage.body.is_empty());
    let access = send(vec![
        ("token", tokens["access_token"].as_str().unwrap()),
        ("token_type_hint", "access_token"),
        ("client_id", "banlieue-cli"),
    ])
    .await;
    assert_eq!(access.status, StatusCode::BAD_REQUEST);
    assert!(access.body.contains("unsupported_token_type"));
    let other = send(vec![("token", refresh), ("client_id", "banlieue-console")]).await;
    assert_eq!(other.status, StatusCode::BAD_REQUEST);
    assert!(other.body.contains("invalid_grant"));
    let unknown_client = send(vec![("token", refresh), ("client_id", "nobody")]).await;
    assert_eq!(unknown_client.status, StatusCode::UNAUTHORIZED);

    let done = send(vec![
        ("token", refresh),
        ("token_type_hint", "refresh_token"),
        ("client_id", "banlieue-cli"),
    ])
    .await;
    assert_eq!(done.status, StatusCode::OK);
    let (_, body) = fx.refresh(refresh).await;
    assert_eq!(error_of(&body), "invalid_grant");
    let events = fx.app.store().recent_audit(50).await.unwrap();
    assert!(events.iter().any(|e| e.action == "oidc.token.revoke"));
}

#[tokio::test]
async fn the_kubeconfig_is_served_only_when_a_cluster_is_configured() {
    let app = TestApp::new().await;
    let missing = app.send(get("/kubeconfig", None)).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);

    let fx =
        Fixture::on(TestApp::with_args(&["--cluster-server", "https://k8s.example:6443"]).await)
            .await;
    let response = fx.app.send(get("/kubeconfig", Some(&fx.cookie))).await;
    assert_eq!(response.status, StatusCode::OK);
    assert!(
        response
            .header("content-type")
            .unwrap()
            .starts_with("application/yaml")
    );
    assert!(response.body.contains("server: https://k8s.example:6443"));
    assert!(response.body.contains("command: banlieue"));
    assert!(response.body.contains("http://127.0.0.1:3000"));
}

/// `GET /kubeconfig` with `authorization`.
fn kubeconfig_with(authorization: &str) -> Request<Body> {
    Request::get("/kubeconfig")
        .header(header::AUTHORIZATION, authorization)
        .body(Body::empty())
        .unwrap()
}

#[tokio::test]
async fn the_kubeconfig_wants_a_session_or_a_console_bearer_token_of_a_viewer_or_better() {
    let fx =
        Fixture::on(TestApp::with_args(&["--cluster-server", "https://k8s.example:6443"]).await)
            .await;
    // Nobody: a program is asked for a bearer token, a browser is sent to sign in.
    let anonymous = fx.app.send(get("/kubeconfig", None)).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    assert!(
        anonymous
            .header("www-authenticate")
            .unwrap()
            .starts_with("Bearer realm=\"banlieue-console\""),
        "{:?}",
        anonymous.header("www-authenticate")
    );
    let browser = fx
        .app
        .send(
            Request::get("/kubeconfig")
                .header(header::ACCEPT, "text/html,application/xhtml+xml")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(browser.status, StatusCode::SEE_OTHER);
    assert_eq!(browser.location(), Some("/sign-in"));

    // A console-audience ID token of alice (developer) is a bearer.
    let console_token = {
        let code = fx
            .code(&authorize_params(&[("audience", Some("banlieue-console"))]))
            .await;
        let (_, body) = fx.exchange(&code, Some(VERIFIER)).await;
        body["id_token"].as_str().unwrap().to_owned()
    };
    let served = fx
        .app
        .send(kubeconfig_with(&format!("Bearer {console_token}")))
        .await;
    assert_eq!(served.status, StatusCode::OK, "{}", served.body);
    assert!(served.body.contains("command: banlieue"));
    // The scheme is case-insensitive (RFC 7235 §2.1).
    let lower = fx
        .app
        .send(kubeconfig_with(&format!("bearer {console_token}")))
        .await;
    assert_eq!(lower.status, StatusCode::OK, "{}", lower.body);

    // Not a console token: kubectl's audience, a forged signature, garbage.
    let kubectl_token = fx.tokens().await["id_token"].as_str().unwrap().to_owned();
    let mut forged = console_token.clone();
    forged.truncate(forged.len() - 4);
    forged.push_str("AAAA");
    let unknown_kid = {
        use base64::Engine as _;
        let header = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(r#"{"alg":"RS256","kid":"SECRET-token-text"}"#);
        let (_, rest) = console_token.split_once('.').unwrap();
        format!("{header}.{rest}")
    };
    for (case, token, why) in [
        (
            "the kubernetes audience",
            kubectl_token.as_str(),
            "the token is for another audience (aud)",
        ),
        (
            "a forged signature",
            forged.as_str(),
            "the signature does not verify",
        ),
        (
            "not a JWT",
            "not-a-token",
            "the token is not a signed JWT (header.payload.signature)",
        ),
        // The caller's own text (here a key id) is never echoed.
        (
            "an unknown key id",
            unknown_kid.as_str(),
            "the token's key (kid) is not published",
        ),
    ] {
        let refused = fx
            .app
            .send(kubeconfig_with(&format!("Bearer {token}")))
            .await;
        assert_eq!(
            refused.status,
            StatusCode::UNAUTHORIZED,
            "{case}: {}",
            refused.body
        );
        // The console's own words, not the JWT library's.
        let challenge = refused.header("www-authenticate").unwrap();
        assert!(
            challenge.contains(&format!(
                "error=\"invalid_token\", error_description=\"{why}\""
            )),
            "{case}: {challenge}"
        );
    }

    // A person without a built-in role, signed in or with a valid token, is refused.
    fx.app.create_user("nora", PASSWORD, &[], false).await;
    let nora = fx.app.sign_in("nora", PASSWORD).await;
    let refused = fx.app.send(get("/kubeconfig", Some(&nora))).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);

    // A valid token of someone disabled since: refused.
    let alice = fx.app.user("alice").await;
    fx.app
        .store()
        .set_disabled(alice.id, true, OffsetDateTime::now_utc())
        .await
        .unwrap();
    let refused = fx
        .app
        .send(kubeconfig_with(&format!("Bearer {console_token}")))
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
}

#[tokio::test]
async fn a_console_bearer_token_is_judged_at_the_callers_instant_for_every_check() {
    let fx = Fixture::new().await;
    let code = fx
        .code(&authorize_params(&[("audience", Some("banlieue-console"))]))
        .await;
    let (_, body) = fx.exchange(&code, Some(VERIFIER)).await;
    let token = body["id_token"].as_str().unwrap();
    let lifetime = time::Duration::seconds(body["expires_in"].as_i64().unwrap());
    let issued = OffsetDateTime::now_utc();

    let user = fx.app.issuer.verify_console_token(token, issued).await;
    assert_eq!(user.unwrap().name.as_str(), "alice");
    // Past `exp` by the caller's clock: refused, although the system clock is not there yet.
    let expired = fx
        .app
        .issuer
        .verify_console_token(token, issued + lifetime + time::Duration::seconds(1))
        .await;
    assert!(
        matches!(&expired, Err(BearerError::InvalidToken(why)) if why.contains("expired")),
        "{expired:?}"
    );
}

fn whoami(authorization: Option<&str>, cookie: Option<&str>) -> Request<Body> {
    let mut request = Request::get("/api/v1/whoami");
    if let Some(value) = authorization {
        request = request.header(header::AUTHORIZATION, value);
    }
    if let Some(value) = cookie {
        request = request.header(header::COOKIE, value);
    }
    request.body(Body::empty()).unwrap()
}

#[tokio::test]
async fn the_json_api_takes_bearer_tokens_only_and_answers_problems() {
    let fx = Fixture::new().await;
    let problem = |response: &support::TestResponse, status: StatusCode| -> Value {
        assert_eq!(response.status, status, "{}", response.body);
        assert_eq!(
            response.header("content-type").as_deref(),
            Some("application/problem+json")
        );
        let body: Value = serde_json::from_str(&response.body).unwrap();
        assert_eq!(body["status"], status.as_u16());
        assert_eq!(body["title"], status.canonical_reason().unwrap());
        body
    };
    // No token; a signed-in browser's cookie is not a credential here.
    for response in [
        fx.app.send(whoami(None, None)).await,
        fx.app.send(whoami(None, Some(&fx.cookie))).await,
    ] {
        problem(&response, StatusCode::UNAUTHORIZED);
        assert_eq!(
            response.header("www-authenticate").as_deref(),
            Some("Bearer realm=\"banlieue-console\"")
        );
    }
    let garbage = fx.app.send(whoami(Some("Bearer not.a.token"), None)).await;
    problem(&garbage, StatusCode::UNAUTHORIZED);
    assert!(
        garbage
            .header("www-authenticate")
            .unwrap()
            .contains("error=\"invalid_token\"")
    );

    let token = {
        let code = fx
            .code(&authorize_params(&[("audience", Some("banlieue-console"))]))
            .await;
        let (_, body) = fx.exchange(&code, Some(VERIFIER)).await;
        body["id_token"].as_str().unwrap().to_owned()
    };
    let me = fx
        .app
        .send(whoami(Some(&format!("Bearer {token}")), None))
        .await;
    assert_eq!(me.status, StatusCode::OK, "{}", me.body);
    let me: Value = serde_json::from_str(&me.body).unwrap();
    assert_eq!(
        me,
        serde_json::json!({
            "source": "console", "username": "alice", "roles": ["developer"],
            "kubernetesUser": "console:alice",
            "kubernetesGroups": ["console:developer", "system:authenticated"],
        })
    );
    // A token for kubectl (audience kubernetes) is not one for the console.
    let kubectl = fx.tokens().await["id_token"].as_str().unwrap().to_owned();
    let refused = fx
        .app
        .send(whoami(Some(&format!("Bearer {kubectl}")), None))
        .await;
    problem(&refused, StatusCode::UNAUTHORIZED);
    // A token of another issuer, with no tenants configured.
    let foreign = fx
        .app
        .send(whoami(
            Some("Bearer eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJodHRwczovL2lkcC5leGFtcGxlIn0.c2ln"),
            None,
        ))
        .await;
    assert!(
        problem(&foreign, StatusCode::UNAUTHORIZED)["detail"]
            .as_str()
            .unwrap()
            .contains("it has no tenants")
    );

    let missing = fx.app.send(get("/api/v1/nothing", None)).await;
    problem(&missing, StatusCode::NOT_FOUND);
    let method = fx
        .app
        .send(
            Request::delete("/api/v1/whoami")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    problem(&method, StatusCode::METHOD_NOT_ALLOWED);
}

/// A JSON API request with `token` as its bearer and `body` as JSON.
fn api(method: &str, path: &str, token: &str, body: Option<Value>) -> Request<Body> {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header(header::AUTHORIZATION, format!("Bearer {token}"));
    match body {
        Some(body) => request
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap(),
        None => request.body(Body::empty()).unwrap(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_api_claims_waits_for_bound_and_releases_as_the_bearer() {
    let (app, _dev) = TestApp::with_dev_cluster().await;
    let fx = Fixture::on(app).await;
    let token = fx.app.id_token(&fx.cookie, "banlieue-console").await;
    let send = |method: &'static str, path: String, body: Option<Value>| {
        let request = api(method, &path, &token, body);
        async { fx.app.send(request).await }
    };
    let problem = |response: &support::TestResponse, status: StatusCode| -> Value {
        assert_eq!(response.status, status, "{}", response.body);
        assert_eq!(
            response.header("content-type").as_deref(),
            Some("application/problem+json")
        );
        serde_json::from_str(&response.body).unwrap()
    };

    let pools = send("GET", "/api/v1/pools".into(), None).await;
    assert_eq!(pools.status, StatusCode::OK, "{}", pools.body);
    let pools: Value = serde_json::from_str(&pools.body).unwrap();
    let sandbox = pools["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["namespace"] == "demo" && p["name"] == "sandbox")
        .unwrap_or_else(|| panic!("the demo pool: {pools}"));
    assert_eq!(sandbox["canClaim"], true, "{sandbox}");

    // What is not a claim request, said so, and nothing made.
    let form = fx
        .app
        .send(
            Request::post("/api/v1/claims")
                .header(header::AUTHORIZATION, format!("Bearer {token}"))
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(Body::from("namespace=demo&pool=sandbox&ttl_seconds=900"))
                .unwrap(),
        )
        .await;
    problem(&form, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    for body in [
        serde_json::json!({"namespace": "demo", "pool": "sandbox"}),
        serde_json::json!({"namespace": "demo", "pool": "sandbox", "ttlSeconds": 900, "owner": "x"}),
        serde_json::json!(["demo", "sandbox", 900]),
    ] {
        let refused = send("POST", "/api/v1/claims".into(), Some(body)).await;
        problem(&refused, StatusCode::BAD_REQUEST);
    }
    let not_offered = send(
        "POST",
        "/api/v1/claims".into(),
        Some(serde_json::json!({"namespace": "demo", "pool": "sandbox", "ttlSeconds": 901})),
    )
    .await;
    assert_eq!(
        problem(&not_offered, StatusCode::UNPROCESSABLE_ENTITY)["field"],
        "ttl_seconds"
    );
    let no_pool = send(
        "POST",
        "/api/v1/claims".into(),
        Some(serde_json::json!({"namespace": "demo", "pool": "nowhere", "ttlSeconds": 900})),
    )
    .await;
    assert_eq!(
        problem(&no_pool, StatusCode::UNPROCESSABLE_ENTITY)["field"],
        "pool"
    );
    // Only a broker may claim for someone else: the admission policy refuses alice.
    let for_bob = send(
        "POST",
        "/api/v1/claims".into(),
        Some(serde_json::json!({
            "namespace": "demo", "pool": "sandbox", "ttlSeconds": 900,
            "subject": {"issuer": "http://127.0.0.1:3000", "id": "bob"},
        })),
    )
    .await;
    problem(&for_bob, StatusCode::FORBIDDEN);
    let listed = send("GET", "/api/v1/claims".into(), None).await;
    assert_eq!(listed.body, r#"{"items":[]}"#, "nothing was made");

    let created = send(
        "POST",
        "/api/v1/claims".into(),
        Some(serde_json::json!({"namespace": "demo", "pool": "sandbox", "ttlSeconds": 900})),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let location = created.header("location").unwrap();
    // A broker's wait: the claim's changes, to its deletion.
    let watch = {
        let request = api("GET", &format!("{location}?watch=true"), &token, None);
        let router = fx.app.router.clone();
        tokio::spawn(async move {
            use tower::ServiceExt;
            let response = router.oneshot(request).await.unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            let body = http_body_util::BodyExt::collect(response.into_body())
                .await
                .unwrap()
                .to_bytes();
            String::from_utf8(body.to_vec()).unwrap()
        })
    };
    let claim: Value = serde_json::from_str(&created.body).unwrap();
    assert_eq!(claim["kind"], "VirtualMachineClaim");
    assert_eq!(
        claim["spec"]["subject"],
        serde_json::json!({"issuer": "http://127.0.0.1:3000", "id": "alice"})
    );
    assert_eq!(
        location,
        format!(
            "/api/v1/claims/demo/{}",
            claim["metadata"]["name"].as_str().unwrap()
        )
    );
    let bound = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        loop {
            let read = send("GET", location.clone(), None).await;
            assert_eq!(read.status, StatusCode::OK, "{}", read.body);
            let read: Value = serde_json::from_str(&read.body).unwrap();
            if read["status"]["phase"] == "Bound" {
                break read;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the claim becomes Bound");
    assert!(bound["status"]["virtualMachineRef"].is_string(), "{bound}");

    let mine: Value =
        serde_json::from_str(&send("GET", "/api/v1/claims".into(), None).await.body).unwrap();
    assert_eq!(mine["items"].as_array().unwrap().len(), 1, "{mine}");
    let everyone = send("GET", "/api/v1/claims?scope=everyone".into(), None).await;
    problem(&everyone, StatusCode::FORBIDDEN);
    for query in ["scope=all", "owner=alice"] {
        let refused = send("GET", format!("/api/v1/claims?{query}"), None).await;
        problem(&refused, StatusCode::BAD_REQUEST);
    }

    let released = send("DELETE", location.clone(), None).await;
    assert_eq!(released.status, StatusCode::ACCEPTED, "{}", released.body);
    tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while send("GET", location.clone(), None).await.status != StatusCode::NOT_FOUND {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the released claim is gone");
    let again = send("DELETE", location.clone(), None).await;
    problem(&again, StatusCode::NOT_FOUND);
    let events: Vec<Value> = tokio::time::timeout(std::time::Duration::from_secs(30), watch)
        .await
        .expect("the watch ends with the claim")
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"ADDED"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"DELETED"), "{kinds:?}");
    assert!(
        kinds[1..kinds.len() - 1].iter().all(|k| *k == "MODIFIED"),
        "{kinds:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["object"]["status"]["phase"] == "Bound"),
        "Bound was sent: {events:?}"
    );
    let watch_gone = send("GET", format!("{location}?watch=true"), None).await;
    problem(&watch_gone, StatusCode::NOT_FOUND);
    let bad_query = send("GET", format!("{location}?watch=maybe"), None).await;
    problem(&bad_query, StatusCode::BAD_REQUEST);
    // The session cookie alone is still no credential.
    let cookie_only = fx
        .app
        .send(
            Request::post("/api/v1/claims")
                .header(header::COOKIE, &fx.cookie)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(
                    r#"{"namespace":"demo","pool":"sandbox","ttlSeconds":900}"#,
                ))
                .unwrap(),
        )
        .await;
    problem(&cookie_only, StatusCode::UNAUTHORIZED);
}

/// The hidden fields of the page's first form that has any: the request as the page
/// posts it back.
fn hidden_fields(html: &str) -> Vec<(String, String)> {
    const HIDDEN: &str = "<input type=\"hidden\" name=\"";
    let start = html.find(HIDDEN).expect("a hidden field");
    let form = &html[start
        ..html[start..]
            .find("</form>")
            .map_or(html.len(), |end| start + end)];
    form.split(HIDDEN)
        .skip(1)
        .map(|rest| {
            let (name, rest) = rest.split_once('"').unwrap();
            let value = rest.split("value=\"").nth(1).unwrap();
            let value = value.split('"').next().unwrap();
            (name.to_owned(), value.replace("&amp;", "&"))
        })
        .collect()
}

#[tokio::test]
async fn prompt_login_and_max_age_ask_a_signed_in_person_to_sign_in_again() {
    let fx = Fixture::new().await;
    for extra in [("prompt", "login"), ("max_age", "0")] {
        let query = encode(&authorize_params(&[(extra.0, Some(extra.1))]));
        let page = fx
            .app
            .send(get(&format!("/oidc/authorize?{query}"), Some(&fx.cookie)))
            .await;
        assert_eq!(page.status, StatusCode::OK);
        assert!(
            page.body.contains("name=\"password\""),
            "{extra:?}: sign-in card"
        );
        assert!(!page.body.contains("Continue as"), "{extra:?}");
        // What the page posts back keeps the request's demand: a confirmation sent with
        // its fields, without signing in, gets the sign-in card again, not a code.
        let mut fields = hidden_fields(&page.body);
        assert!(
            fields.contains(&(extra.0.to_owned(), extra.1.to_owned())),
            "{extra:?} in {fields:?}"
        );
        fields.push(("decision".into(), "allow".into()));
        let posted = fx
            .app
            .send(post_form(
                "/oidc/authorize",
                encode(&fields),
                Some(&fx.cookie),
            ))
            .await;
        assert_eq!(
            posted.status,
            StatusCode::OK,
            "{extra:?}: {:?}",
            posted.location()
        );
        assert!(posted.body.contains("name=\"password\""), "{extra:?}");
    }
    // The confirmation offers another account: the same request with prompt=login.
    let query = encode(&authorize_params(&[]));
    let page = fx
        .app
        .send(get(&format!("/oidc/authorize?{query}"), Some(&fx.cookie)))
        .await;
    assert!(page.body.contains("prompt=login"), "use another account");

    fx.app
        .create_user("bob", PASSWORD, &["viewer"], false)
        .await;
    let mut fields = authorize_params(&[("prompt", Some("login"))]);
    fields.push(("user_name".into(), "bob".into()));
    fields.push(("password".into(), PASSWORD.into()));
    let signed_in = fx
        .app
        .send(post_form(
            "/oidc/authorize",
            encode(&fields),
            Some(&fx.cookie),
        ))
        .await;
    assert_eq!(
        signed_in.status,
        StatusCode::SEE_OTHER,
        "{}",
        signed_in.body
    );
    let code = query_of(signed_in.location().unwrap())["code"].clone();
    let (_, body) = fx.exchange(&code, Some(VERIFIER)).await;
    assert_eq!(claims(body["id_token"].as_str().unwrap())["sub"], "bob");
}

#[tokio::test]
async fn a_malformed_state_is_shown_not_echoed() {
    let fx = Fixture::new().await;
    let long = "s".repeat(600);
    for state in ["a\u{1b}[31mred", long.as_str()] {
        let query = encode(&authorize_params(&[("state", Some(state))]));
        let page = fx
            .app
            .send(get(&format!("/oidc/authorize?{query}"), Some(&fx.cookie)))
            .await;
        assert_eq!(page.status, StatusCode::BAD_REQUEST);
        assert!(page.location().is_none());
    }
}

#[tokio::test]
async fn a_query_that_is_not_utf_8_is_refused_not_altered() {
    let fx = Fixture::new().await;
    let query = encode(&authorize_params(&[("scope", None)]));
    let page = fx
        .app
        .send(get(
            &format!("/oidc/authorize?{query}&scope=openid%20profile%FF"),
            Some(&fx.cookie),
        ))
        .await;
    assert_eq!(page.status, StatusCode::BAD_REQUEST);
    assert!(page.location().is_none());
    assert!(page.body.contains("could not be read"), "{}", page.body);
}

#[tokio::test]
async fn refusals_are_audited_and_refresh_cannot_widen_its_scope() {
    let fx = Fixture::new().await;
    let code = fx.code(&authorize_params(&[])).await;
    let (status, _) = fx.exchange(&code, Some(CHALLENGE)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let events = fx.app.store().recent_audit(20).await.unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.action == "oidc.token.issue" && e.result == "refused" && e.actor == "alice"),
        "{events:?}"
    );

    let tokens = fx.tokens().await;
    let (status, body) = fx
        .token(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", tokens["refresh_token"].as_str().unwrap()),
            ("client_id", "banlieue-cli"),
            ("scope", "openid offline_access admin"),
        ])
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(error_of(&body), "invalid_scope");
    let events = fx.app.store().recent_audit(20).await.unwrap();
    assert!(
        events.iter().any(|e| e.action == "oidc.token.refresh"
            && e.result == "refused"
            && e.actor == "alice"
            && e.detail.contains("widen")),
        "a refused refresh is audited with its reason: {events:?}"
    );

    let unknown = fx
        .app
        .send(client_post(
            "/oidc/token",
            &[("grant_type", "refresh_token")],
        ))
        .await;
    assert_eq!(unknown.status, StatusCode::UNAUTHORIZED);
    assert!(
        unknown.header("www-authenticate").is_some(),
        "RFC 6749 §5.2"
    );
}

#[tokio::test]
async fn metrics_count_tokens_by_grant_type_and_refresh_reuse() {
    let fx = Fixture::new().await;
    let issued = |text: &str, grant: &str| {
        sample(
            text,
            &format!("banlieue_oidc_tokens_issued_total{{grant_type=\"{grant}\"}}"),
        )
    };
    // A refused exchange issues nothing.
    let code = fx.code(&authorize_params(&[])).await;
    let (status, _) = fx.exchange(&code, Some(&"x".repeat(43))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let text = fx.app.metrics().await;
    assert_eq!(issued(&text, "authorization_code"), Some(0.0), "{text}");

    let first = fx.tokens().await;
    let r1 = first["refresh_token"].as_str().unwrap().to_owned();
    let (status, second) = fx.refresh(&r1).await;
    assert_eq!(status, StatusCode::OK);
    let r2 = second["refresh_token"].as_str().unwrap().to_owned();
    let (status, _) = fx.refresh(&r2).await;
    assert_eq!(status, StatusCode::OK);
    let text = fx.app.metrics().await;
    assert_eq!(issued(&text, "authorization_code"), Some(1.0), "{text}");
    assert_eq!(issued(&text, "refresh_token"), Some(2.0), "{text}");
    assert_eq!(
        sample(&text, "banlieue_oidc_refresh_reuse_detected_total"),
        Some(0.0),
        "{text}"
    );

    // r1 again, two rotations later: reuse, the family is revoked and nothing is issued.
    let (status, reuse) = fx.refresh(&r1).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(error_of(&reuse), "invalid_grant");
    let text = fx.app.metrics().await;
    assert!(
        text.lines()
            .any(|l| l == "banlieue_oidc_refresh_reuse_detected_total 1"),
        "{text}"
    );
    assert_eq!(issued(&text, "refresh_token"), Some(2.0), "{text}");
    assert_eq!(
        sample(&text, "banlieue_sign_ins_total{result=\"success\"}"),
        Some(1.0),
        "the fixture's sign-in"
    );
}
