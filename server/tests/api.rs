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
    tenant_in(id, issuer, enabled, &format!("{id}-sandboxes"))
}

/// Tenant `id` whose people may claim in `namespace`.
fn tenant_in(id: &str, issuer: &str, enabled: bool, namespace: &str) -> String {
    format!(
        "apiVersion: console.banlieue.io/v1alpha1\nkind: ConsoleTenant\nmetadata:\n  name: {id}\n\
         spec:\n  tenantId: {id}\n  enabled: {enabled}\n  oidc:\n    issuer: {issuer}\n\
         \x20   jwksURL: {issuer}/jwks\n    audience: banlieue-console\n    tenantClaim: tenant\n\
         \x20   usernameClaim: preferred_username\n    rolesClaim: roles\n\
         \x20 defaultRole: viewer\n  allowedRoles: [viewer, developer]\n  namespaces: [{namespace}]\n"
    )
}

/// A console reading the tenant `documents` from a file in the returned directory.
async fn console_with_tenants(documents: &[String]) -> (TestApp, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tenants.yaml");
    std::fs::write(&file, documents.join("---\n")).unwrap();
    let app = TestApp::with_args(&[
        "--tenants-source",
        "file",
        "--tenants-file",
        file.to_str().unwrap(),
    ])
    .await;
    (app, dir)
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
    let (app, _dir) = console_with_tenants(&[
        tenant("acme", &provider.issuer, true),
        tenant("globex", &provider.issuer, false),
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
    // One fixed message per status: the reason is the log's, the audit log's and the
    // metrics'.
    assert_eq!(body["detail"], "the token's tenant is suspended", "{body}");
    // The provider of acme and globex naming a tenant it does not serve.
    let (status, body, _) = whoami(&app, &provider.token("mallory", "initech", &[])).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(
        body["detail"], "the bearer token is not a valid ID token of a tenant",
        "{body}"
    );

    let audit = app.store().recent_audit(10).await.unwrap();
    let refused: Vec<(&str, &str, &str)> = audit
        .iter()
        .filter(|e| e.action == "tenant.token")
        .map(|e| (e.target.as_str(), e.result.as_str(), e.detail.as_str()))
        .collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert_eq!(refused[0].0, "-");
    assert_eq!(refused[0].1, "no-tenant");
    assert!(refused[0].2.contains("tenant is not acme"), "{refused:?}");
    assert_eq!(
        refused[1],
        ("globex", "suspended", "tenant globex is suspended")
    );

    let metrics = app.metrics().await;
    for line in [
        r#"banlieue_tenant_token_verifications_total{tenant="acme",result="success"} 1"#,
        r#"banlieue_tenant_token_verifications_total{tenant="globex",result="suspended"} 1"#,
        r#"banlieue_tenant_token_verifications_total{tenant="-",result="no-tenant"} 1"#,
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in {metrics}");
    }
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("banlieue_tenant_jwks_fetches_total{")
                && l.contains(r#"result="success""#)),
        "{metrics}"
    );
}

/// `method path` with `token` as the bearer and `body` as JSON.
async fn call(
    app: &TestApp,
    method: &str,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> support::TestResponse {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header(header::AUTHORIZATION, format!("Bearer {token}"));
    let request = match body {
        Some(body) => request
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string())),
        None => request.body(Body::empty()),
    };
    app.send(request.unwrap()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_people_claim_through_the_api_as_themselves_in_their_tenants_namespaces() {
    let provider = Provider::start().await;
    let (app, dir) = console_with_tenants(&[
        tenant_in("acme", &provider.issuer, true, "demo"),
        tenant("globex", &provider.issuer, true),
    ])
    .await;
    let dev = server::dev_cluster::DevCluster::start(
        "127.0.0.1:0".parse().unwrap(),
        &dir.path().join("cluster"),
        "http://127.0.0.1:3000",
    )
    .await
    .unwrap();
    dev.admit_tenants("http://127.0.0.1:3000", [provider.issuer.as_str()])
        .await
        .unwrap();
    let app = app
        .with_cluster(
            dev.access.clone(),
            cluster::ControllerConfig::new("banlieue-system", "test"),
        )
        .await;
    let claim_in_demo = json!({"namespace": "demo", "pool": "sandbox", "ttlSeconds": 900});

    // alice of acme, a developer, claims in acme's namespace as herself.
    let alice = provider.token("alice", "acme", &["developer"]);
    let pools = call(&app, "GET", "/api/v1/pools", &alice, None).await;
    assert_eq!(pools.status, StatusCode::OK, "{}", pools.body);
    let pools: Value = serde_json::from_str(&pools.body).unwrap();
    assert_eq!(pools["items"][0]["canClaim"], true, "{pools}");
    let created = call(
        &app,
        "POST",
        "/api/v1/claims",
        &alice,
        Some(claim_in_demo.clone()),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let claim: Value = serde_json::from_str(&created.body).unwrap();
    assert_eq!(
        claim["spec"]["subject"],
        json!({"issuer": provider.issuer, "id": "acme:alice"})
    );
    let listed = call(&app, "GET", "/api/v1/claims", &alice, None).await;
    let listed: Value = serde_json::from_str(&listed.body).unwrap();
    assert_eq!(listed["items"].as_array().unwrap().len(), 1, "{listed}");

    // gina of globex may claim only in globex-sandboxes: offered nothing, refused.
    let gina = provider.token("gina", "globex", &["developer"]);
    let pools = call(&app, "GET", "/api/v1/pools", &gina, None).await;
    let pools: Value = serde_json::from_str(&pools.body).unwrap();
    assert_eq!(pools["items"][0]["canClaim"], false, "{pools}");
    let refused = call(
        &app,
        "POST",
        "/api/v1/claims",
        &gina,
        Some(claim_in_demo.clone()),
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert!(
        refused.body.contains("globex-sandboxes"),
        "{}",
        refused.body
    );
    // bob of acme holds only the default role viewer: Kubernetes refuses him.
    let bob = provider.token("bob", "acme", &[]);
    let refused = call(&app, "POST", "/api/v1/claims", &bob, Some(claim_in_demo)).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    // Nor may he release alice's.
    let location = created.header("location").unwrap();
    let refused = call(&app, "DELETE", &location, &bob, None).await;
    assert_ne!(refused.status, StatusCode::ACCEPTED, "{}", refused.body);
    let released = call(&app, "DELETE", &location, &alice, None).await;
    assert_eq!(released.status, StatusCode::ACCEPTED, "{}", released.body);

    let audit = app.store().recent_audit(20).await.unwrap();
    let creates: Vec<(&str, &str)> = audit
        .iter()
        .filter(|e| e.action == "claim.create")
        .map(|e| (e.actor.as_str(), e.result.as_str()))
        .collect();
    assert_eq!(
        creates,
        [
            ("oidc:acme:bob", "forbidden"),
            ("oidc:globex:gina", "forbidden"),
            ("oidc:acme:alice", "success"),
        ]
    );
}
