//! The `openidconnect` crate as a relying party of the console's issuer, over HTTP on
//! loopback: discovery, the code flow with PKCE S256, ID-token validation against the
//! JWKS, refresh, and the ID tokens such a party must refuse (tampered, `alg: none`,
//! unknown `kid`, expired, another audience).

mod common;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::{cluster_trusting, console, sign_in_as_alice};
use openidconnect::core::{CoreClient, CoreIdToken, CoreProviderMetadata, CoreResponseType};
use openidconnect::{
    AuthenticationFlow, AuthorizationCode, ClientId, CsrfToken, IssuerUrl, Nonce,
    OAuth2TokenResponse, PkceCodeChallenge, RedirectUrl, Scope, TokenResponse,
};

const REDIRECT: &str = "http://127.0.0.1:53124/callback";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openidconnect_signs_in_validates_and_refreshes() {
    let dir = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!("http://{}", listener.local_addr().unwrap());
    let cluster = cluster_trusting(&issuer).await;
    console(dir.path(), &cluster, listener, &issuer).await;
    let http = banlieue_cli::http::OidcHttp(reqwest::Client::new());

    let metadata =
        CoreProviderMetadata::discover_async(IssuerUrl::new(issuer.clone()).unwrap(), &http)
            .await
            .expect("discovery and JWKS");
    let client =
        CoreClient::from_provider_metadata(metadata, ClientId::new("banlieue-cli".into()), None)
            .set_redirect_uri(RedirectUrl::new(REDIRECT.into()).unwrap());
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let (url, state, nonce) = client
        .authorize_url(
            AuthenticationFlow::<CoreResponseType>::AuthorizationCode,
            CsrfToken::new_random,
            Nonce::new_random,
        )
        .add_scope(Scope::new("offline_access".into()))
        .add_extra_param("audience", "kubernetes")
        .set_pkce_challenge(challenge)
        .url();

    let callback = sign_in_as_alice(url.as_str(), &issuer).await;
    let query: std::collections::HashMap<_, _> = url::Url::parse(&callback)
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect();
    assert_eq!(&query["state"], state.secret());
    assert_eq!(query["iss"], issuer, "RFC 9207 issuer identification");

    let tokens = client
        .exchange_code(AuthorizationCode::new(query["code"].clone()))
        .unwrap()
        .set_pkce_verifier(verifier)
        .request_async(&http)
        .await
        .expect("code exchange");
    let kubernetes_too = |aud: &openidconnect::Audience| aud.as_str() == "kubernetes";
    let verifier = client
        .id_token_verifier()
        .set_other_audience_verifier_fn(kubernetes_too);
    let id_token = tokens.id_token().expect("an ID token");
    let claims = id_token
        .claims(&verifier, &nonce)
        .expect("a valid ID token");
    assert_eq!(claims.subject().as_str(), "alice");
    assert_eq!(claims.issuer().as_str(), issuer);

    let refreshed = client
        .exchange_refresh_token(tokens.refresh_token().expect("offline_access"))
        .unwrap()
        .request_async(&http)
        .await
        .expect("refresh");
    assert_ne!(
        refreshed.refresh_token().unwrap().secret(),
        tokens.refresh_token().unwrap().secret(),
        "rotated"
    );
    let no_nonce = |_: Option<&Nonce>| Ok(());
    refreshed
        .id_token()
        .unwrap()
        .claims(&verifier, no_nonce)
        .expect("the refreshed ID token is valid");

    // What a relying party must refuse.
    let genuine = id_token.to_string();
    let [header, payload, signature]: [&str; 3] =
        genuine.split('.').collect::<Vec<_>>().try_into().unwrap();
    let rewrite = |part: &str, edit: &dyn Fn(&mut serde_json::Value)| {
        let mut value: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap();
        edit(&mut value);
        URL_SAFE_NO_PAD.encode(value.to_string())
    };
    let tampered_payload = rewrite(payload, &|c| c["sub"] = "mallory".into());
    let unknown_kid = rewrite(header, &|h| h["kid"] = "not-a-published-key".into());
    let alg_none = rewrite(header, &|h| h["alg"] = "none".into());
    let forged = [
        (
            "tampered",
            format!("{header}.{tampered_payload}.{signature}"),
        ),
        (
            "unknown kid",
            format!("{unknown_kid}.{payload}.{signature}"),
        ),
        ("alg none", format!("{alg_none}.{payload}.")),
    ];
    for (case, token) in forged {
        let refused = token
            .parse::<CoreIdToken>()
            .map_err(|e| e.to_string())
            .and_then(|t| {
                t.claims(&verifier, &nonce)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            });
        assert!(refused.is_err(), "{case} accepted");
    }
    let later = chrono::Utc::now() + chrono::Duration::minutes(6);
    let expired = id_token.claims(&verifier.clone().set_time_fn(move || later), &nonce);
    assert!(expired.is_err(), "expired after 5 minutes");
    let other_audience = client
        .id_token_verifier()
        .set_other_audience_verifier_fn(|aud| aud.as_str() == "banlieue-console");
    assert!(
        id_token.claims(&other_audience, &nonce).is_err(),
        "a token for kubernetes is not a token for the console API"
    );
    cluster.shutdown().await;
}
