//! The JSON API with tenant tokens: a console configured with a tenants file, whose
//! provider's keys a JWK Set served here holds (tokens signed here: the verifier's own
//! suite runs npm oidc-provider as a real provider).

mod support;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use support::TestApp;

/// A provider's signing key and the JWK Set it publishes, served on loopback.
struct Provider {
    issuer: String,
    pair: EcdsaKeyPair,
}

impl Provider {
    async fn start() -> Self {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
        let point = pair.public_key().as_ref().to_vec();
        let jwks = json!({"keys": [{
            "kty": "EC", "crv": "P-256", "kid": "k1", "alg": "ES256", "use": "sig",
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]), "y": URL_SAFE_NO_PAD.encode(&point[33..]),
        }]});
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = format!("http://{}", listener.local_addr().unwrap());
        let router = axum::Router::new().route(
            "/jwks",
            axum::routing::get(move || {
                let jwks = jwks.clone();
                async move { axum::Json(jwks) }
            }),
        );
        tokio::spawn(async move { axum::serve(listener, router).await });
        Self { issuer, pair }
    }

    /// An ID token of `sub` in `tenant` with `roles`.
    fn token(&self, sub: &str, tenant: &str, roles: &[&str]) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let header = URL_SAFE_NO_PAD.encode(r#"{"alg":"ES256","typ":"JWT","kid":"k1"}"#);
        let claims = URL_SAFE_NO_PAD.encode(
            json!({
                "iss": self.issuer, "sub": sub, "aud": "banlieue-console", "tenant": tenant,
                "preferred_username": sub, "roles": roles, "iat": now, "exp": now + 300,
            })
            .to_string(),
        );
        let message = format!("{header}.{claims}");
        let signature = self
            .pair
            .sign(&SystemRandom::new(), message.as_bytes())
            .unwrap();
        format!("{message}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()))
    }
}

fn tenant(id: &str, issuer: &str, enabled: bool) -> String {
    format!(
        "apiVersion: console.banlieue.io/v1alpha1\nkind: ConsoleTenant\nmetadata:\n  name: {id}\n\
         spec:\n  tenantId: {id}\n  enabled: {enabled}\n  oidc:\n    issuer: {issuer}\n\
         \x20   jwksURL: {issuer}/jwks\n    audience: banlieue-console\n    tenantClaim: tenant\n\
         \x20   usernameClaim: preferred_username\n    rolesClaim: roles\n\
         \x20 defaultRole: viewer\n  allowedRoles: [viewer, developer]\n  namespaces: [{id}-sandboxes]\n"
    )
}

async fn whoami(app: &TestApp, token: &str) -> (StatusCode, Value, Option<String>) {
    let response = app
        .send(
            Request::get("/api/v1/whoami")
                .header(header::AUTHORIZATION, format!("Bearer {token}"))
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    let content_type = response.header("content-type");
    (
        response.status,
        serde_json::from_str(&response.body).unwrap(),
        content_type,
    )
}

#[tokio::test]
async fn tenant_people_are_who_their_token_says_and_a_suspended_tenant_gets_403() {
    let provider = Provider::start().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tenants.yaml");
    std::fs::write(
        &file,
        format!(
            "{}---\n{}",
            tenant("acme", &provider.issuer, true),
            tenant("globex", &provider.issuer, false)
        ),
    )
    .unwrap();
    let app = TestApp::with_args(&[
        "--tenants-source",
        "file",
        "--tenants-file",
        file.to_str().unwrap(),
    ])
    .await;

    let (status, body, _) = whoami(
        &app,
        &provider.token("alice", "acme", &["developer", "admin"]),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({
            "source": "tenant", "tenant": "acme", "username": "alice", "roles": ["developer"],
            "kubernetesUser": "oidc:acme:alice",
            "kubernetesGroups": ["console:developer", "system:authenticated"],
            "namespaces": ["acme-sandboxes"],
        })
    );
    let (status, body, content_type) = whoami(&app, &provider.token("gina", "globex", &[])).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(content_type.as_deref(), Some("application/problem+json"));
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("globex is suspended"),
        "{body}"
    );
    // The provider of acme and globex naming a tenant it does not serve.
    let (status, body, _) = whoami(&app, &provider.token("mallory", "initech", &[])).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
}
