//! Each rule of a ConsoleTenant document (SPEC §7): what is refused, naming the document
//! and the field, and what is accepted.

use serde_json::{Value, json};
use tenants::document::{self, RawDocument};
use tenants::{JwksLocation, TenantSet};

/// A valid tenant `acme`.
fn acme() -> Value {
    json!({
        "apiVersion": "console.banlieue.io/v1alpha1",
        "kind": "ConsoleTenant",
        "metadata": {"name": "acme", "namespace": "banlieue-system"},
        "spec": {
            "tenantId": "acme",
            "displayName": "ACME Corp",
            "oidc": {
                "issuer": "https://idp.acme.example",
                "audience": "banlieue-console",
                "tenantClaim": "tenant",
                "usernameClaim": "preferred_username",
                "rolesClaim": "roles",
            },
            "defaultRole": "viewer",
            "allowedRoles": ["viewer", "developer"],
            "namespaces": ["acme-sandboxes"],
        },
    })
}

fn checked(documents: Vec<Value>) -> TenantSet {
    document::check_all(
        documents
            .into_iter()
            .enumerate()
            .map(|(i, content)| RawDocument {
                label: format!("doc {}", i + 1),
                content,
            })
            .collect(),
    )
}

/// `change` applied to `acme`: its single refusal as `field: reason`.
fn refusal(change: impl FnOnce(&mut Value)) -> String {
    let mut doc = acme();
    change(&mut doc);
    let set = checked(vec![doc]);
    assert!(set.tenants.is_empty(), "accepted: {set:?}");
    let [refused] = set.refused.as_slice() else {
        panic!("one refusal expected: {set:?}");
    };
    assert_eq!(refused.document, "doc 1");
    format!("{}: {}", refused.field, refused.reason)
}

#[test]
fn a_valid_tenant_is_read_with_every_field() {
    let set = checked(vec![acme()]);
    assert!(set.refused.is_empty(), "{set:?}");
    assert!(set.warnings.is_empty(), "{set:?}");
    let tenant = &set.tenants["acme"];
    assert_eq!(tenant.display_name, "ACME Corp");
    assert!(tenant.enabled, "enabled by default");
    assert_eq!(tenant.issuer, "https://idp.acme.example");
    assert_eq!(
        tenant.jwks,
        JwksLocation::Discovery(
            "https://idp.acme.example/.well-known/openid-configuration"
                .parse()
                .unwrap()
        )
    );
    assert_eq!(tenant.default_role.as_str(), "viewer");
    assert_eq!(*tenant.namespaces, ["acme-sandboxes"]);
}

#[test]
fn unknown_fields_are_refused_where_they_are() {
    let at_root = refusal(|d| d["specs"] = json!({}));
    assert_eq!(at_root, "specs: unknown field");
    let in_spec = refusal(|d| d["spec"]["defaultRoles"] = json!("viewer"));
    assert!(
        in_spec.starts_with("spec.defaultRoles: unknown field `defaultRoles`"),
        "{in_spec}"
    );
    let in_oidc = refusal(|d| d["spec"]["oidc"]["jwksUrl"] = json!("https://x.example"));
    assert!(
        in_oidc.starts_with("spec.oidc.jwksUrl: unknown field `jwksUrl`, expected one of"),
        "{in_oidc}"
    );
}

#[test]
fn the_type_must_be_a_console_tenant() {
    assert_eq!(
        refusal(|d| d["apiVersion"] = json!("console.banlieue.io/v1")),
        "apiVersion: is \"console.banlieue.io/v1\", not console.banlieue.io/v1alpha1"
    );
    assert_eq!(
        refusal(|d| d["kind"] = json!("Tenant")),
        "kind: is \"Tenant\", not ConsoleTenant"
    );
    assert_eq!(
        refusal(|d| {
            d.as_object_mut().unwrap().remove("kind");
        }),
        "kind: is missing, not ConsoleTenant"
    );
    assert_eq!(
        refusal(|d| d["metadata"] = json!({})),
        "metadata.name: missing"
    );
    assert_eq!(
        refusal(|d| {
            d.as_object_mut().unwrap().remove("spec");
        }),
        "spec: missing"
    );
}

#[test]
fn invalid_fields_are_refused_with_the_rule() {
    for (change, expected) in [
        (
            json!({"tenantId": "Acme"}),
            "spec.tenantId: \"Acme\" is not an RFC 1123 label",
        ),
        (json!({"tenantId": 7}), "spec.tenantId: invalid type"),
        (
            json!({"displayName": " "}),
            "spec.displayName: must be 1-64",
        ),
        (
            json!({"displayName": "ac\u{200b}me"}),
            "spec.displayName: holds the invisible character U+200B",
        ),
        (
            json!({"oidc": {"issuer": "ftp://idp.example", "tenantClaim": "t", "usernameClaim": "sub", "rolesClaim": "r"}}),
            "spec.oidc.issuer: \"ftp://idp.example\": the scheme ftp is not https",
        ),
        (
            json!({"oidc": {"issuer": "https://idp.example", "audience": "", "tenantClaim": "t", "usernameClaim": "sub", "rolesClaim": "r"}}),
            "spec.oidc.audience: is empty",
        ),
        (
            json!({"oidc": {"issuer": "https://idp.example", "audience": "a", "tenantClaim": "t t", "usernameClaim": "sub", "rolesClaim": "r"}}),
            "spec.oidc.tenantClaim: \"t t\" is not a claim name",
        ),
        (
            json!({"oidc": {"issuer": "https://idp.example", "audience": "a", "usernameClaim": "sub", "rolesClaim": "r"}}),
            "spec.oidc: missing field `tenantClaim`",
        ),
        (
            json!({"allowedRoles": []}),
            "spec.allowedRoles: must list 1 to 16 roles",
        ),
        (
            json!({"allowedRoles": ["viewer", "Dev"]}),
            "spec.allowedRoles[1]: \"Dev\": the name must start with a lower-case letter",
        ),
        (
            json!({"allowedRoles": ["viewer", "viewer"]}),
            "spec.allowedRoles[1]: viewer is listed twice",
        ),
        (
            json!({"defaultRole": "admin"}),
            "spec.defaultRole: admin is not in allowedRoles (viewer, developer)",
        ),
        (
            json!({"namespaces": []}),
            "spec.namespaces: must list 1 to 64 namespaces",
        ),
        (
            json!({"namespaces": ["ok", "Not_OK"]}),
            "spec.namespaces[1]: \"Not_OK\" is not a namespace name",
        ),
        (json!({"enabled": "yes"}), "spec.enabled: invalid type"),
    ] {
        let shown = change.to_string();
        let got = refusal(|d| {
            for (key, value) in change.as_object().unwrap() {
                d["spec"][key] = value.clone();
            }
        });
        assert!(got.starts_with(expected), "{shown}: {got}");
    }
}

#[test]
fn keys_over_plain_http_come_only_from_loopback() {
    let jwks = |url: &str| {
        let mut doc = acme();
        doc["spec"]["oidc"]["jwksURL"] = json!(url);
        checked(vec![doc])
    };
    for refused in ["http://idp.acme.example/jwks", "http://10.0.0.7/jwks"] {
        let set = jwks(refused);
        assert_eq!(set.refused.len(), 1, "{refused}: {set:?}");
        assert_eq!(set.refused[0].field, "spec.oidc.jwksURL");
        assert!(set.refused[0].reason.contains("plain http"), "{set:?}");
    }
    for accepted in [
        "http://127.0.0.1:9000/jwks",
        "http://[::1]:9000/jwks",
        "http://localhost:9000/jwks",
        "https://keys.acme.example/jwks",
    ] {
        let set = jwks(accepted);
        assert!(set.refused.is_empty(), "{accepted}: {set:?}");
        assert_eq!(
            set.tenants["acme"].jwks,
            JwksLocation::Url(accepted.parse().unwrap())
        );
    }
}

#[test]
fn a_tenant_without_an_audience_is_accepted_with_a_warning() {
    let mut doc = acme();
    doc["spec"]["oidc"]
        .as_object_mut()
        .unwrap()
        .remove("audience");
    let set = checked(vec![doc]);
    assert!(set.tenants.contains_key("acme"));
    let [warning] = set.warnings.as_slice() else {
        panic!("{set:?}")
    };
    assert_eq!(warning.document, "doc 1");
    assert!(
        warning.message.contains("tenant acme has no oidc.audience"),
        "{warning}"
    );
}

#[test]
fn a_tenant_id_given_twice_is_refused_in_both_documents() {
    let mut again = acme();
    again["metadata"]["name"] = json!("acme-again");
    let mut other = acme();
    other["metadata"]["name"] = json!("globex");
    other["spec"]["tenantId"] = json!("globex");
    let set = checked(vec![acme(), again, other]);
    assert_eq!(set.tenants.keys().collect::<Vec<_>>(), ["globex"]);
    let refused: Vec<String> = set.refused.iter().map(ToString::to_string).collect();
    assert_eq!(
        refused,
        [
            "doc 1: spec.tenantId: acme is also the tenantId of doc 2",
            "doc 2: spec.tenantId: acme is also the tenantId of doc 1",
        ]
    );
}

#[test]
fn a_stream_holds_documents_and_lists_in_yaml_or_json() {
    let one = serde_yaml::to_string(&acme()).unwrap();
    let mut globex = acme();
    globex["metadata"]["name"] = json!("globex");
    globex["spec"]["tenantId"] = json!("globex");
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [globex]});
    let stream = format!("{one}---\n---\n{}\n", serde_json::to_string(&list).unwrap());
    let documents = document::parse_stream("tenants.yaml", &stream).unwrap();
    let labels: Vec<&str> = documents.iter().map(|d| d.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "tenants.yaml, document 1 (acme)",
            "tenants.yaml, document 3, item 1 (globex)",
        ]
    );
    let set = document::check_all(documents);
    assert_eq!(set.tenants.len(), 2, "{set:?}");

    let broken = document::parse_stream("tenants.yaml", "a: [\n").unwrap_err();
    assert_eq!(broken.document, "tenants.yaml, document 1");
    assert!(broken.reason.starts_with("not YAML"), "{broken}");
    let no_items = document::parse_stream("t.yaml", "kind: List\nitems: 3\n").unwrap_err();
    assert_eq!(no_items.field, "items");
}
