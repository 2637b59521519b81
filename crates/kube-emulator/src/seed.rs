//! The objects a fresh cluster has: the system namespaces, and the bootstrap RBAC roles
//! and bindings (`cluster-admin`, `system:discovery`, `system:basic-user`).

use serde_json::{Value, json};

use crate::api;
use crate::auth::UserInfo;
use crate::store::Store;

/// Creates the objects of a fresh cluster that are missing from `store`.
pub(crate) fn seed(store: &mut Store) {
    let ctx_user = UserInfo::new("system:apiserver", &["system:masters"]);
    let mut ctx = api::Ctx::new(&ctx_user);
    let mut create =
        |store: &mut Store, group: &str, version: &str, plural: &str, ns: &str, obj: Value| {
            if let Some(def) = store.registry.get(group, version, plural) {
                let name = obj["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                if store.get(group, plural, ns, &name).is_none()
                    && let Err(e) = api::create(store, &def, ns, obj, &mut ctx)
                {
                    tracing::warn!(error = %e, "seed object refused");
                }
            }
        };
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        create(
            store,
            "",
            "v1",
            "namespaces",
            "",
            json!({"metadata": {"name": ns}}),
        );
    }
    let rbac = "rbac.authorization.k8s.io";
    let roles = [
        (
            "cluster-admin",
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
        ),
        (
            "system:discovery",
            json!([{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/readyz", "/openapi", "/openapi/*", "/version", "/version/"], "verbs": ["get"]}]),
        ),
        (
            "system:basic-user",
            json!([
                {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
                {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}
            ]),
        ),
    ];
    for (name, rules) in roles {
        create(
            store,
            rbac,
            "v1",
            "clusterroles",
            "",
            json!({"metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}}, "rules": rules}),
        );
    }
    for (name, role, group) in [
        ("cluster-admin", "cluster-admin", "system:masters"),
        (
            "system:discovery",
            "system:discovery",
            "system:authenticated",
        ),
        (
            "system:basic-user",
            "system:basic-user",
            "system:authenticated",
        ),
    ] {
        create(
            store,
            rbac,
            "v1",
            "clusterrolebindings",
            "",
            json!({
                "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
                "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": role},
                "subjects": [{"apiGroup": rbac, "kind": "Group", "name": group}]
            }),
        );
    }
}
