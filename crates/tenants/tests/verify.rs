//! The verifier against real identity providers: npm `oidc-provider` as the IdP of two
//! tenants that share one issuer (acme, and globex, suspended) and of a third with its own
//! (initech, found through discovery).

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use support::{Idp, tenant, write_tenants};
use tenants::{
    JwksCache, JwksPolicy, KeyError, TenantRegistry, TenantSource, TenantVerifier, VerifyError,
};

const INTERVAL: Duration = Duration::from_secs(30);

struct Setup {
    dir: tempfile::TempDir,
    shared: Idp,
    own: Idp,
    verifier: TenantVerifier,
    start: Instant,
}

impl Setup {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let shared = Idp::start(
            dir.path(),
            "shared",
            0,
            "shared-1",
            json!({
                "alice": {"tenant": "acme", "roles": ["developer", "admin"], "preferred_username": "alice", "email": "alice@acme.example"},
                "bob": {"tenant": "acme", "roles": ["admin"], "preferred_username": "bob"},
                "gina": {"tenant": "globex", "roles": ["developer"], "preferred_username": "gina"},
                // The shared provider's person naming the other provider's tenant.
                "mallory": {"tenant": "initech", "roles": ["developer"], "preferred_username": "mallory"},
            }),
        )
        .await;
        let own = Idp::start(
            dir.path(),
            "own",
            0,
            "own-1",
            json!({"ivan": {"tenant": "initech", "roles": "developer", "preferred_username": "ivan"}}),
        )
        .await;
        let jwks = format!("{}/jwks", shared.issuer);
        let path = dir.path().join("tenants.yaml");
        write_tenants(
            &path,
            &[
                tenant("acme", &shared.issuer, Some(&jwks), true),
                tenant("globex", &shared.issuer, Some(&jwks), false),
                tenant("initech", &own.issuer, None, true),
            ],
        );
        let start = Instant::now();
        let (registry, _) = TenantRegistry::load(TenantSource::File { path }, INTERVAL, start)
            .await
            .unwrap();
        let verifier = TenantVerifier::new(
            Arc::new(registry),
            JwksCache::new(JwksPolicy::default()).unwrap(),
        );
        Self {
            dir,
            shared,
            own,
            verifier,
            start,
        }
    }

    /// The registry read again `after` the start (so it is not stale then).
    async fn at(&self, after: Duration) -> Instant {
        let now = self.start + after;
        self.verifier.registry().refresh(now).await;
        now
    }
}

#[tokio::test]
async fn tenant_people_verify_with_their_roles_and_no_provider_mints_for_another_tenant() {
    let setup = Setup::start().await;
    let now = setup.start;
    let verify = |token: String| {
        let verifier = &setup.verifier;
        async move { verifier.verify(&token, now).await }
    };

    let alice = verify(setup.shared.id_token("alice").await).await.unwrap();
    assert_eq!(alice.tenant, "acme");
    assert_eq!(
        (alice.subject.as_str(), alice.username.as_str()),
        ("alice", "alice")
    );
    assert_eq!(alice.kubernetes_user(), "oidc:acme:alice");
    assert_eq!(alice.email.as_deref(), Some("alice@acme.example"));
    assert_eq!(*alice.namespaces, ["acme-sandboxes"]);
    let roles = |identity: &tenants::TenantIdentity| -> Vec<String> {
        identity
            .roles
            .iter()
            .map(|r| r.as_str().to_owned())
            .collect()
    };
    assert_eq!(roles(&alice), ["developer"], "admin is not an allowed role");
    let bob = verify(setup.shared.id_token("bob").await).await.unwrap();
    assert_eq!(roles(&bob), ["viewer"], "no allowed role left: the default");

    // The other provider, found through its discovery document; a single role as a string.
    let ivan = verify(setup.own.id_token("ivan").await).await.unwrap();
    assert_eq!(
        (ivan.tenant.as_str(), roles(&ivan)),
        ("initech", vec!["developer".to_owned()])
    );

    // The shared provider's token naming initech: its issuer is not initech's.
    let mallory = verify(setup.shared.id_token("mallory").await)
        .await
        .unwrap_err()
        .error;
    assert!(matches!(mallory, VerifyError::NoTenant { .. }), "{mallory}");
    assert_eq!(mallory.status(), 401);

    // Suspended: 403 for its people, while the tenant beside it on the same issuer works.
    let gina = verify(setup.shared.id_token("gina").await)
        .await
        .unwrap_err();
    assert_eq!(gina.tenant.as_deref(), Some("globex"), "held to globex");
    let gina = gina.error;
    assert_eq!(gina, VerifyError::Suspended("globex".into()));
    assert_eq!(gina.status(), 403);
    assert!(verify(setup.shared.id_token("alice").await).await.is_ok());

    // acme and globex name one endpoint: one cache for both.
    assert_eq!(setup.verifier.keys().len(), 2);

    // Counted by the tenant each was held to (none for mallory) and result, and each
    // endpoint fetched once.
    let metrics = setup.verifier.metrics();
    let verified = |tenant: &str, result: &'static str| {
        metrics
            .verifications
            .get_or_create(&tenants::metrics::VerificationLabels {
                tenant: tenant.to_owned(),
                result,
            })
            .get()
    };
    assert_eq!(verified("acme", "success"), 3, "alice twice and bob");
    assert_eq!(verified("initech", "success"), 1);
    assert_eq!(verified("globex", "suspended"), 1);
    assert_eq!(verified(tenants::metrics::NO_TENANT, "no-tenant"), 1);
    let mut text = String::new();
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let fetches: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("banlieue_tenant_jwks_fetches_total{"))
        .collect();
    assert_eq!(fetches.len(), 2, "{text}");
    assert!(
        fetches
            .iter()
            .all(|l| l.contains("result=\"success\"") && l.ends_with(" 1")),
        "{text}"
    );
}

#[tokio::test]
async fn a_key_the_provider_withdrew_stops_verifying_after_the_fresh_window() {
    let mut setup = Setup::start().await;
    let old = setup.own.id_token("ivan").await;
    assert!(setup.verifier.verify(&old, setup.start).await.is_ok());
    setup.own.rotate("own-2").await;

    let minute = setup.at(Duration::from_secs(60)).await;
    assert!(
        setup.verifier.verify(&old, minute).await.is_ok(),
        "fresh keys are used as fetched"
    );
    let later = setup
        .at(JwksPolicy::default().fresh + Duration::from_secs(1))
        .await;
    let refused = setup.verifier.verify(&old, later).await.unwrap_err().error;
    assert!(
        matches!(refused, VerifyError::Key(KeyError::NoKey { .. })),
        "{refused}"
    );
    assert_eq!(refused.status(), 401);
    let new = setup.own.id_token("ivan").await;
    assert!(setup.verifier.verify(&new, later).await.is_ok());
}

#[tokio::test]
async fn known_keys_outlive_a_provider_that_is_down_for_a_day_and_no_longer() {
    let mut setup = Setup::start().await;
    let token = setup.shared.id_token("alice").await;
    assert!(setup.verifier.verify(&token, setup.start).await.is_ok());
    setup.shared.stop().await;

    let stale_keys = setup
        .at(JwksPolicy::default().fresh + Duration::from_secs(1))
        .await;
    assert!(
        setup.verifier.verify(&token, stale_keys).await.is_ok(),
        "the refetch failed: the known keys stay"
    );
    let day = setup
        .at(JwksPolicy::default().keep + Duration::from_secs(60))
        .await;
    let refused = setup.verifier.verify(&token, day).await.unwrap_err().error;
    assert!(
        matches!(refused, VerifyError::Key(KeyError::Unavailable { .. })),
        "{refused}"
    );
    assert_eq!(refused.status(), 503);
}

#[tokio::test]
async fn a_tenant_edited_into_an_invalid_document_is_dropped_alone_and_its_keys_forgotten() {
    let setup = Setup::start().await;
    let (alice, ivan) = (
        setup.shared.id_token("alice").await,
        setup.own.id_token("ivan").await,
    );
    assert!(setup.verifier.verify(&ivan, setup.start).await.is_ok());
    let mut broken = tenant("initech", &setup.own.issuer, None, true);
    broken["spec"]["defaultRole"] = json!("admin");
    let jwks = format!("{}/jwks", setup.shared.issuer);
    write_tenants(
        &setup.dir.path().join("tenants.yaml"),
        &[
            tenant("acme", &setup.shared.issuer, Some(&jwks), true),
            broken,
        ],
    );
    let now = setup.at(Duration::from_secs(30)).await;
    assert!(setup.verifier.verify(&alice, now).await.is_ok());
    let refused = setup.verifier.verify(&ivan, now).await.unwrap_err().error;
    assert!(
        matches!(refused, VerifyError::UnknownIssuer { .. }),
        "{refused}"
    );
    assert_eq!(setup.verifier.keys().len(), 1, "initech's cache is dropped");

    // Too long without a successful read: every tenant token is refused with 503.
    let stale = now + INTERVAL * tenants::registry::STALE_AFTER_INTERVALS + Duration::from_secs(1);
    let refused = setup
        .verifier
        .verify(&alice, stale)
        .await
        .unwrap_err()
        .error;
    assert!(matches!(refused, VerifyError::Stale(_)), "{refused}");
    assert_eq!(refused.status(), 503);
}
