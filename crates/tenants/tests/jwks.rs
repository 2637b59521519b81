//! The verifier and key cache with tokens no real provider would sign, and key servers
//! made here: a forged signature, `alg: none`, HMAC, a wrong `typ`, unknown `kid`s by the
//! thousand, an https endpoint redirecting to http.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use support::{HandKey, KeyServer, tenant, write_tenants};
use tenants::{
    JwksCache, JwksPolicy, KeyError, TenantRegistry, TenantSource, TenantVerifier, VerifyError,
};

async fn verifier(dir: &tempfile::TempDir, documents: &[Value], keys: JwksCache) -> TenantVerifier {
    let path = dir.path().join("tenants.yaml");
    write_tenants(&path, documents);
    let (registry, _) = TenantRegistry::load(
        TenantSource::File { path },
        Duration::from_secs(30),
        Instant::now(),
    )
    .await
    .unwrap();
    TenantVerifier::new(Arc::new(registry), keys)
}

fn claims(issuer: &str, tenant: &str) -> Value {
    json!({
        "iss": issuer, "sub": "hana", "aud": support::CLIENT_ID, "tenant": tenant,
        "preferred_username": "hana", "roles": ["developer"],
    })
}

#[tokio::test]
async fn tokens_no_provider_would_sign_are_refused() {
    let key = HandKey::new("k1");
    let server = KeyServer::start(vec![key.jwk()], false).await;
    let dir = tempfile::tempdir().unwrap();
    let jwks = format!("{}/jwks", server.base);
    let verifier = verifier(
        &dir,
        &[tenant("hand", &server.base, Some(&jwks), true)],
        JwksCache::new(JwksPolicy::default()).unwrap(),
    )
    .await;
    let now = Instant::now();
    let good = key.sign(claims(&server.base, "hand"), Some("JWT"), None);
    assert_eq!(verifier.verify(&good, now).await.unwrap().tenant, "hand");

    let refused = |token: String| {
        let verifier = &verifier;
        async move { verifier.verify(&token, now).await.unwrap_err().error }
    };
    // Signed by a key of ours under the provider's kid.
    let forged = HandKey::new("k1").sign(claims(&server.base, "hand"), None, None);
    assert!(matches!(refused(forged).await, VerifyError::Invalid(_)));
    // A signature longer than any key's (RSA-8192: 1,024 bytes), readable or not.
    let message = good.rsplit_once('.').unwrap().0;
    for (signature, why) in [
        ("A".repeat(2000), "the signature does not verify"),
        (
            format!("{}!", "A".repeat(2000)),
            "the signature is not base64url",
        ),
        ("A!".into(), "the signature is not base64url"),
    ] {
        assert_eq!(
            refused(format!("{message}.{signature}")).await,
            VerifyError::Invalid(why.into())
        );
    }
    // `alg: none`, and HMAC with the public key as the secret.
    let body = good.split('.').nth(1).unwrap();
    let none = format!(
        "{}.{body}.",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"none","kid":"k1"}"#)
    );
    assert!(matches!(refused(none).await, VerifyError::Malformed(_)));
    let mut hmac = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    hmac.kid = Some("k1".into());
    let mut hmac_claims = claims(&server.base, "hand");
    hmac_claims["exp"] = json!(jsonwebtoken::get_current_timestamp() + 60);
    let hmac = jsonwebtoken::encode(
        &hmac,
        &hmac_claims,
        &jsonwebtoken::EncodingKey::from_secret(key.jwk().to_string().as_bytes()).unwrap(),
    )
    .unwrap();
    assert!(matches!(refused(hmac).await, VerifyError::Invalid(_)));
    // Not an ID token (an access token's type), expired, someone else's audience.
    let typed = key.sign(claims(&server.base, "hand"), Some("at+jwt"), None);
    assert!(matches!(refused(typed).await, VerifyError::Invalid(_)));
    let mut expired = claims(&server.base, "hand");
    expired["exp"] = json!(jsonwebtoken::get_current_timestamp() - 3600);
    assert!(matches!(
        refused(key.sign(expired, None, None)).await,
        VerifyError::Invalid(_)
    ));
    let mut other_audience = claims(&server.base, "hand");
    other_audience["aud"] = json!("another-app");
    let other_audience = key.sign(other_audience, None, None);
    assert!(matches!(
        refused(other_audience).await,
        VerifyError::NoTenant { .. }
    ));
    let mut no_sub = claims(&server.base, "hand");
    no_sub.as_object_mut().unwrap().remove("sub");
    assert!(matches!(
        refused(key.sign(no_sub, None, None)).await,
        VerifyError::Invalid(_)
    ));
}

#[tokio::test]
async fn unknown_kids_cause_one_fetch_per_window_and_do_not_delay_another_tenant() {
    let (key, other_key) = (HandKey::new("k1"), HandKey::new("o1"));
    let server = KeyServer::start(vec![key.jwk()], false).await;
    let other = KeyServer::start(vec![other_key.jwk()], false).await;
    let dir = tempfile::tempdir().unwrap();
    let verifier = Arc::new(
        verifier(
            &dir,
            &[
                tenant(
                    "hand",
                    &server.base,
                    Some(&format!("{}/jwks", server.base)),
                    true,
                ),
                tenant(
                    "other",
                    &other.base,
                    Some(&format!("{}/jwks", other.base)),
                    true,
                ),
            ],
            JwksCache::new(JwksPolicy::default()).unwrap(),
        )
        .await,
    );
    let now = Instant::now();
    let good = key.sign(claims(&server.base, "hand"), None, None);
    verifier.verify(&good, now).await.unwrap();
    assert_eq!(server.fetches(), 1);
    let unknown = key.sign(claims(&server.base, "hand"), None, Some("unknown"));
    assert!(verifier.verify(&unknown, now).await.is_err());
    assert_eq!(
        server.fetches(),
        1,
        "no refetch within the window of the last fetch"
    );

    // The next window: 10,000 unknown kids at once make one fetch between them.
    let window = now + JwksPolicy::default().min_fetch_interval;

    let flood: Vec<String> = (0..10_000)
        .map(|i| {
            key.sign(
                claims(&server.base, "hand"),
                None,
                Some(&format!("random-{i}")),
            )
        })
        .collect();
    let tasks: Vec<_> = flood
        .into_iter()
        .map(|token| {
            let verifier = verifier.clone();
            tokio::spawn(async move { verifier.verify(&token, window).await })
        })
        .collect();
    let valid = other_key.sign(claims(&other.base, "other"), None, None);
    let started = Instant::now();
    verifier.verify(&valid, window).await.unwrap();
    let other_took = started.elapsed();
    for task in tasks {
        let refused = task.await.unwrap().unwrap_err().error;
        assert!(
            matches!(refused, VerifyError::Key(KeyError::NoKey { .. })),
            "{refused}"
        );
    }
    assert_eq!(server.fetches(), 2, "one refetch for 10,000 unknown kids");
    assert_eq!(other.fetches(), 1);
    assert!(
        other_took < Duration::from_secs(2),
        "another tenant waited {other_took:?}"
    );

    // The next window allows one more; a key the provider added meanwhile is then found.
    let added = HandKey::new("k2");
    server.keys.lock().unwrap()["keys"] = json!([key.jwk(), added.jwk()]);
    let next = window + JwksPolicy::default().min_fetch_interval;
    let rotated = added.sign(claims(&server.base, "hand"), None, None);
    assert_eq!(
        verifier.verify(&rotated, next).await.unwrap().tenant,
        "hand"
    );
    assert_eq!(server.fetches(), 3);
}

#[tokio::test]
async fn an_https_key_endpoint_redirecting_to_http_is_refused() {
    let key = HandKey::new("k1");
    let plain = KeyServer::start(vec![key.jwk()], false).await;
    let secure = KeyServer::start(vec![key.jwk()], true).await;
    *secure.redirect_to.lock().unwrap() = format!("{}/jwks", plain.base);
    let ca = secure.certificate.clone().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let documents = [
        tenant(
            "direct",
            "https://direct.example",
            Some(&format!("{}/jwks", secure.base)),
            true,
        ),
        tenant(
            "redirected",
            "https://redirected.example",
            Some(&format!("{}/redirect", secure.base)),
            true,
        ),
    ];
    let verifier = verifier(
        &dir,
        &documents,
        JwksCache::trusting(JwksPolicy::default(), ca.as_bytes()).unwrap(),
    )
    .await;
    let now = Instant::now();
    let direct = key.sign(claims("https://direct.example", "direct"), None, None);
    assert_eq!(
        verifier.verify(&direct, now).await.unwrap().tenant,
        "direct"
    );
    let redirected = key.sign(
        claims("https://redirected.example", "redirected"),
        None,
        None,
    );
    match verifier.verify(&redirected, now).await.unwrap_err().error {
        VerifyError::Key(KeyError::Unavailable { reason, .. }) => {
            assert!(reason.contains("not https"), "{reason}");
        }
        other => panic!("{other}"),
    }
    assert_eq!(plain.fetches(), 0, "the http endpoint was never asked");
}
