//! ValidatingAdmissionPolicy (CEL), JWT authentication from an `AuthenticationConfiguration`,
//! static tokens, anonymous refusal and impersonation checks.

mod common;

use std::time::Duration;

use axum::Json;
use axum::routing::get;
use base64::Engine;
use common::{api_error, client_for, https, start};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::{Api, Client};
use kube_emulator::auth::parse_authentication_configuration;
use kube_emulator::{EmulatorConfig, UserInfo};
use serde_json::{Value, json};

const CRD: &str = include_str!("fixtures/crd.yaml");

async fn create_json<K>(client: &Client, namespace: Option<&str>, value: Value) -> K
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace.unwrap_or("default"));
    let obj: K = serde_json::from_value(value).expect("object parses");
    api.create(&PostParams::default(), &obj)
        .await
        .expect("created")
}

async fn post_cluster(client: &Client, path: &str, body: Value) {
    let req = http::Request::post(path)
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(&body).unwrap())
        .unwrap();
    let _: Value = client
        .request(req)
        .await
        .unwrap_or_else(|e| panic!("POST {path}: {e}"));
}

fn claims_api(client: &Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("banlieue.io", "v1alpha1", "VirtualMachineClaim"),
        "virtualmachineclaims",
    );
    Api::namespaced_with(client.clone(), "default", &ar)
}

fn claim(name: &str, subject: &str, pool: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "banlieue.io/v1alpha1", "kind": "VirtualMachineClaim",
        "metadata": {"name": name},
        "spec": {"poolRef": pool, "ttlSeconds": 600, "subject": {"issuer": "https://idp", "id": subject}}
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validating_admission_policy_with_params_variables_and_message_expression() {
    let (emu, admin) = start(EmulatorConfig::default()).await;
    let crd: CustomResourceDefinition = serde_yaml::from_str(CRD).unwrap();
    Api::<CustomResourceDefinition>::all(admin.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    post_cluster(&admin, &format!("{rbac}/clusterroles"), json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "claims"},
        "rules": [{"apiGroups": ["banlieue.io"], "resources": ["virtualmachineclaims"], "verbs": ["*"]}]
    })).await;
    post_cluster(&admin, &format!("{rbac}/clusterrolebindings"), json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "claims"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "claims"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "console:developer"}]
    })).await;
    let _: ConfigMap = create_json(&admin, None, json!({
        "metadata": {"name": "claim-params"},
        "data": {"brokers": "console:broker", "usernamePrefix": "console:", "issuers": "https://idp"}
    })).await;
    let vap = "/apis/admissionregistration.k8s.io/v1";
    post_cluster(&admin, &format!("{vap}/validatingadmissionpolicies"), json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "claim-subject"},
        "spec": {
            "failurePolicy": "Fail",
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {"resourceRules": [{"apiGroups": ["banlieue.io"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["virtualmachineclaims"]}]},
            "variables": [
                {"name": "brokers", "expression": "params.data.brokers.split(',')"},
                {"name": "isBroker", "expression": "request.userInfo.username in variables.brokers"}
            ],
            "validations": [
                {"expression": "request.operation != 'CREATE' || variables.isBroker || params.data.usernamePrefix + object.spec.subject.id == request.userInfo.username",
                 "messageExpression": "'subject.id ' + object.spec.subject.id + ' is not the caller ' + request.userInfo.username"},
                {"expression": "object.spec.subject.issuer in params.data.issuers.split(',')", "message": "issuer not allowed"},
                {"expression": "request.operation != 'UPDATE' || object.spec.poolRef == oldObject.spec.poolRef", "message": "spec.poolRef is immutable", "reason": "Forbidden"}
            ]
        }
    })).await;
    post_cluster(&admin, &format!("{vap}/validatingadmissionpolicybindings"), json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "claim-subject-binding"},
        "spec": {"policyName": "claim-subject", "validationActions": ["Deny"],
                 "paramRef": {"name": "claim-params", "namespace": "default", "parameterNotFoundAction": "Deny"}}
    })).await;
    emu.add_token(
        "alice-token",
        UserInfo::new("console:alice", &["console:developer"]),
    );
    emu.add_token(
        "broker-token",
        UserInfo::new("console:broker", &["console:developer"]),
    );
    let alice = claims_api(&client_for(&emu, "alice-token").await);
    let broker = claims_api(&client_for(&emu, "broker-token").await);

    alice
        .create(&PostParams::default(), &claim("mine", "alice", "p1"))
        .await
        .expect("own claim allowed");
    let (code, reason, message) = api_error(
        alice
            .create(&PostParams::default(), &claim("theirs", "bob", "p1"))
            .await,
    );
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    assert!(
        message.contains("ValidatingAdmissionPolicy 'claim-subject' with binding 'claim-subject-binding' denied request: subject.id bob is not the caller console:alice"),
        "{message}"
    );
    broker
        .create(&PostParams::default(), &claim("for-bob", "bob", "p1"))
        .await
        .expect("brokers may claim for others");
    let (code, reason, message) = api_error(
        alice
            .patch(
                "mine",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"poolRef": "p2"}})),
            )
            .await,
    );
    assert_eq!((code, reason.as_str()), (403, "Forbidden"), "{message}");
    assert!(message.contains("spec.poolRef is immutable"), "{message}");
    alice
        .patch(
            "mine",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .expect("other updates pass");
    // Without params the binding denies (parameterNotFoundAction: Deny).
    Api::<ConfigMap>::namespaced(admin.clone(), "default")
        .delete("claim-params", &Default::default())
        .await
        .unwrap();
    let (code, _, message) = api_error(
        alice
            .create(&PostParams::default(), &claim("later", "alice", "p1"))
            .await,
    );
    assert_eq!(code, 422, "{message}");
    emu.shutdown().await;
}

/// An OIDC issuer on loopback, HTTPS with its own CA or plain HTTP; returns the issuer
/// URL and the CA PEM (empty for HTTP).
async fn serve_issuer(jwk: Value, tls: bool) -> (String, String) {
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let scheme = if tls { "https" } else { "http" };
    let url = format!("{scheme}://{}", tcp.local_addr().unwrap());
    let issuer = url.clone();
    let app = axum::Router::new()
        .route(
            "/.well-known/openid-configuration",
            get(move || {
                let issuer = issuer.clone();
                async move { Json(json!({"issuer": issuer, "jwks_uri": format!("{issuer}/jwks")})) }
            }),
        )
        .route(
            "/jwks",
            get(move || {
                let jwk = jwk.clone();
                async move { Json(json!({"keys": [jwk]})) }
            }),
        );
    if !tls {
        tokio::spawn(async move {
            let _ = axum::serve(tcp, app).await;
        });
        return (url, String::new());
    }
    let certs = kube_emulator::tls::generate().expect("certs");
    let acceptor = kube_emulator::tls::acceptor(&certs).expect("acceptor");
    let listener = kube_emulator::tls::TlsListener::new(tcp, acceptor).unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, certs.ca_pem)
}

fn p256_jwk(key: &rcgen::KeyPair) -> Value {
    let raw = key.public_key_raw();
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    json!({"kty": "EC", "crv": "P-256", "x": b64(&raw[1..33]), "y": b64(&raw[33..65]), "kid": "k1", "alg": "ES256", "use": "sig"})
}

/// The real server refuses `http` issuers; the emulator accepts them on loopback only
/// behind `allow_insecure_loopback_issuers`, and JWTs from such an issuer then work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_issuer_needs_the_insecure_loopback_option() {
    let key = rcgen::KeyPair::generate().expect("P-256 key");
    let (issuer, _) = serve_issuer(p256_jwk(&key), false).await;
    let cfg = |url: &str| {
        parse_authentication_configuration(&format!(
            "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: AuthenticationConfiguration\njwt:\n- issuer:\n    url: {url}\n    audiences: [kubernetes]\n  claimMappings:\n    username:\n      claim: sub\n      prefix: 'oidc:'\n"
        ))
        .expect("config parses")
    };
    let refused = kube_emulator::Emulator::start(EmulatorConfig {
        authentication: Some(cfg(&issuer)),
        ..EmulatorConfig::default()
    })
    .await;
    let Err(err) = refused else {
        panic!("an http issuer must be refused by default")
    };
    assert!(
        err.to_string().contains("URL scheme must be https"),
        "{err}"
    );
    let remote = kube_emulator::Emulator::start(EmulatorConfig {
        authentication: Some(cfg("http://idp.example")),
        allow_insecure_loopback_issuers: true,
        ..EmulatorConfig::default()
    })
    .await;
    assert!(remote.is_err(), "non-loopback http stays refused");
    let (emu, _admin) = start(EmulatorConfig {
        authentication: Some(cfg(&issuer)),
        allow_insecure_loopback_issuers: true,
        ..EmulatorConfig::default()
    })
    .await;
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some("k1".into());
    let token = jsonwebtoken::encode(
        &header,
        &json!({"iss": issuer, "sub": "bob", "aud": "kubernetes", "exp": now() + 300}),
        &jsonwebtoken::EncodingKey::from_ec_der(&key.serialize_der()),
    )
    .expect("signed");
    let review: SelfSubjectReview = Api::all(client_for(&emu, &token).await)
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .expect("JWT from the loopback http issuer accepted");
    let user = review.status.and_then(|s| s.user_info).expect("userInfo");
    assert_eq!(user.username.as_deref(), Some("oidc:bob"));
    emu.shutdown().await;
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_authenticator_maps_claims_with_prefixes() {
    let key = rcgen::KeyPair::generate().expect("P-256 key");
    let (issuer, issuer_ca) = serve_issuer(p256_jwk(&key), true).await;
    let ca_block: String = issuer_ca.lines().map(|l| format!("      {l}\n")).collect();
    let cfg = parse_authentication_configuration(&format!(
        "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: AuthenticationConfiguration\njwt:\n- issuer:\n    url: {issuer}\n    audiences: [kubernetes]\n    certificateAuthority: |\n{ca_block}  claimMappings:\n    username:\n      claim: sub\n      prefix: 'console:'\n    groups:\n      claim: groups\n      prefix: 'console:'\n  userValidationRules:\n  - expression: \"!user.username.startsWith('console:system:')\"\n    message: reserved\n"
    ))
    .expect("config parses");
    let (emu, _admin) = start(EmulatorConfig {
        authentication: Some(cfg),
        ..EmulatorConfig::default()
    })
    .await;
    let encoding = jsonwebtoken::EncodingKey::from_ec_der(&key.serialize_der());
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some("k1".into());
    let sign = |claims: Value| jsonwebtoken::encode(&header, &claims, &encoding).expect("signed");
    let good = sign(
        json!({"iss": issuer, "sub": "alice", "aud": "kubernetes", "exp": now() + 300, "iat": now(), "groups": ["viewer", "developer"]}),
    );
    let review: SelfSubjectReview = Api::all(client_for(&emu, &good).await)
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .expect("JWT accepted");
    let user = review.status.and_then(|s| s.user_info).expect("userInfo");
    assert_eq!(user.username.as_deref(), Some("console:alice"));
    let groups = user.groups.unwrap_or_default();
    for g in [
        "console:viewer",
        "console:developer",
        "system:authenticated",
    ] {
        assert!(groups.iter().any(|x| x == g), "{g} missing from {groups:?}");
    }
    let http = https(&emu);
    let status_for = |token: String| {
        let http = http.clone();
        let url = format!("{}/api/v1/namespaces/default/configmaps", emu.base_url());
        async move {
            http.get(url)
                .bearer_auth(token)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(
        status_for(good.clone()).await,
        403,
        "authenticated but not authorised"
    );
    let wrong_aud =
        sign(json!({"iss": issuer, "sub": "alice", "aud": "other", "exp": now() + 300}));
    assert_eq!(status_for(wrong_aud).await, 401);
    let expired =
        sign(json!({"iss": issuer, "sub": "alice", "aud": "kubernetes", "exp": now() - 10}));
    assert_eq!(status_for(expired).await, 401);
    let other_key = rcgen::KeyPair::generate().unwrap();
    let forged = jsonwebtoken::encode(
        &header,
        &json!({"iss": issuer, "sub": "alice", "aud": "kubernetes", "exp": now() + 300}),
        &jsonwebtoken::EncodingKey::from_ec_der(&other_key.serialize_der()),
    )
    .unwrap();
    assert_eq!(status_for(forged).await, 401);
    let reserved = sign(
        json!({"iss": issuer, "sub": "system:admin", "aud": "kubernetes", "exp": now() + 300}),
    );
    assert_eq!(
        status_for(reserved).await,
        401,
        "userValidationRules refuse the user"
    );
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_refused_and_impersonation_needs_rbac() {
    let (emu, admin) = start(EmulatorConfig::default()).await;
    let http = https(&emu);
    let url = format!("{}/api/v1/namespaces", emu.base_url());
    let anon = http.get(&url).send().await.unwrap();
    assert_eq!(anon.status().as_u16(), 401);
    let body: Value = anon.json().await.unwrap();
    assert_eq!(
        (
            body["kind"].as_str(),
            body["reason"].as_str(),
            body["code"].as_u64()
        ),
        (Some("Status"), Some("Unauthorized"), Some(401))
    );
    assert_eq!(
        http.get(&url)
            .bearer_auth("garbage")
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        401
    );

    emu.add_token(
        "svc-token",
        UserInfo::new("system:serviceaccount:console:console", &[]),
    );
    let denied = http
        .get(&url)
        .bearer_auth("svc-token")
        .header("Impersonate-User", "console:alice")
        .send()
        .await
        .unwrap();
    assert_eq!(denied.status().as_u16(), 403);
    let body: Value = denied.json().await.unwrap();
    assert_eq!(
        body["message"],
        r#"users "console:alice" is forbidden: User "system:serviceaccount:console:console" cannot impersonate resource "users" in API group "" at the cluster scope"#
    );
    post_cluster(&admin, "/apis/rbac.authorization.k8s.io/v1/clusterroles", json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "impersonator"},
        "rules": [{"apiGroups": [""], "resources": ["users", "groups"], "verbs": ["impersonate"]}]
    })).await;
    post_cluster(&admin, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "console-impersonates"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "impersonator"},
        "subjects": [{"kind": "ServiceAccount", "name": "console", "namespace": "console"}]
    })).await;
    let whoami = http
        .post(format!(
            "{}/apis/authentication.k8s.io/v1/selfsubjectreviews",
            emu.base_url()
        ))
        .bearer_auth("svc-token")
        .header("Impersonate-User", "console:alice")
        .header("Impersonate-Group", "console:viewer")
        .json(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}))
        .send()
        .await
        .unwrap();
    assert_eq!(whoami.status().as_u16(), 201);
    let body: Value = whoami.json().await.unwrap();
    assert_eq!(body["status"]["userInfo"]["username"], "console:alice");
    assert_eq!(
        body["status"]["userInfo"]["groups"],
        json!(["console:viewer", "system:authenticated"])
    );
    // The impersonated user has no rights of its own.
    let list = http
        .get(&url)
        .bearer_auth("svc-token")
        .header("Impersonate-User", "console:alice")
        .send()
        .await
        .unwrap();
    assert_eq!(list.status().as_u16(), 403);
    tokio::time::sleep(Duration::from_millis(10)).await;
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_escalation_is_prevented() {
    let (emu, admin) = start(EmulatorConfig::default()).await;
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    // role-admin may manage roles and bindings and read configmaps, nothing more.
    post_cluster(&admin, &format!("{rbac}/clusterroles"), json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "role-admin"},
        "rules": [
            // Not "*": that would include the escalate and bind verbs.
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles", "clusterrolebindings"], "verbs": ["get", "list", "create", "update", "patch", "delete"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}
        ]
    })).await;
    post_cluster(&admin, &format!("{rbac}/clusterroles"), json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "secret-reader"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]
    })).await;
    post_cluster(&admin, &format!("{rbac}/clusterrolebindings"), json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "role-admins"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "role-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "console:carol"}]
    })).await;
    emu.add_token("carol-token", UserInfo::new("console:carol", &[]));
    let http = https(&emu);
    let post = |path: String, body: Value| {
        let http = http.clone();
        let url = format!("{}{path}", emu.base_url());
        async move {
            let r = http
                .post(url)
                .bearer_auth("carol-token")
                .json(&body)
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let held = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "cm-viewer"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]});
    assert_eq!(
        post(format!("{rbac}/clusterroles"), held).await.0,
        201,
        "a role within one's own rights"
    );
    let (code, body) = post(format!("{rbac}/clusterroles"), json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "sneaky"}, "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]})).await;
    assert_eq!(code, 403, "{body}");
    let msg = body["message"].as_str().unwrap();
    assert!(
        msg.contains("is attempting to grant RBAC permissions not currently held")
            && msg.contains(r#"Resources:["secrets"]"#),
        "{msg}"
    );
    let (code, body) = post(format!("{rbac}/clusterrolebindings"), json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "grab"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "secret-reader"},
        "subjects": [{"kind": "User", "name": "console:carol"}]})).await;
    assert_eq!(code, 403, "binding a role one does not hold: {body}");
    let (code, _) = post(format!("{rbac}/clusterrolebindings"), json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "share"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cm-viewer"},
        "subjects": [{"kind": "User", "name": "console:dave"}]})).await;
    assert_eq!(code, 201, "binding a role within one's rights");
    // roleRef is immutable.
    let patch = http
        .patch(format!(
            "{}{rbac}/clusterrolebindings/share",
            emu.base_url()
        ))
        .bearer_auth(emu.admin_token())
        .header("Content-Type", "application/merge-patch+json")
        .body(r#"{"roleRef":{"name":"secret-reader"}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(patch.status().as_u16(), 422);
    let body: Value = patch.json().await.unwrap();
    assert_eq!(body["details"]["causes"][0]["field"], "roleRef", "{body}");
    emu.shutdown().await;
}
