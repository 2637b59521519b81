//! The chart under the real `helm` and the real kube-apiserver of the test bed
//! (`scripts/testbed`, which installs it with `helm install`): what Helm installed is
//! what the API server holds, and what the in-process clusters apply
//! (`cluster::chart`) is what Helm renders.

use std::collections::BTreeMap;

use banlieue_testbed::{RELEASE, RELEASE_NAMESPACE, Testbed};
use cluster::chart::{self, ClaimSubjectPolicy};
use kube::api::{Api, DynamicObject};
use kube::core::GroupVersionKind;
use kube::discovery::{Discovery, Scope};

fn testbed() -> Option<Testbed> {
    Testbed::from_env("the chart suite")
}

/// Where `installed` lacks or differs from something `manifest` says (the API server adds
/// defaults and metadata, which do not count); `None` when it holds all of it.
fn missing_from(manifest: &serde_json::Value, installed: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    match (manifest, installed) {
        (Value::Object(want), Value::Object(have)) => {
            want.iter().find_map(|(key, value)| match have.get(key) {
                Some(have) => missing_from(value, have).map(|at| format!(".{key}{at}")),
                None => Some(format!(".{key}: missing")),
            })
        }
        (Value::Array(want), Value::Array(have)) if want.len() == have.len() => want
            .iter()
            .zip(have)
            .enumerate()
            .find_map(|(i, (w, h))| missing_from(w, h).map(|at| format!("[{i}]{at}"))),
        (want, have) if want == have => None,
        (want, have) => Some(format!(": {want} installed as {have}")),
    }
}

/// Objects by (kind, namespace, name), for comparing renderings.
fn by_key(objects: Vec<DynamicObject>) -> BTreeMap<(String, String, String), serde_json::Value> {
    objects
        .into_iter()
        .map(|o| {
            let kind = o.types.as_ref().map(|t| t.kind.clone()).unwrap_or_default();
            let key = (
                kind,
                o.metadata.namespace.clone().unwrap_or_default(),
                o.metadata.name.clone().unwrap_or_default(),
            );
            (key, serde_json::to_value(o).unwrap())
        })
        .collect()
}

#[tokio::test]
async fn the_committed_rendering_is_what_helm_renders() {
    let Some(bed) = testbed() else { return };
    let chart_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../charts/banlieue-console");
    let rendered = bed
        .helm_ok(&["template", RELEASE, chart_dir, "-n", RELEASE_NAMESPACE])
        .await;
    let committed = chart::RENDERED
        .split_once("\n---")
        .map(|(_, rest)| format!("---{rest}"))
        .expect("the committed rendering starts with its header");
    assert_eq!(
        committed, rendered,
        "charts/rendered/banlieue-console.yaml is stale: run scripts/render-chart"
    );

    // Values reach the chart only through the policy's ConfigMap, as `manifests` sets it.
    let policy = ClaimSubjectPolicy {
        issuers: "https://a.example\nhttps://b.example\n".into(),
        brokers: "console:broker\n".into(),
        username_prefix: "tenant:".into(),
        issuer_prefixes: "https://b.example=b:\n".into(),
    };
    let values = bed.dir().join("render-values.yaml");
    let yaml = serde_json::json!({"claimSubjectPolicy": {
        "issuers": policy.issuers, "brokers": policy.brokers,
        "usernamePrefix": policy.username_prefix, "issuerPrefixes": policy.issuer_prefixes,
    }});
    std::fs::write(&values, serde_json::to_string(&yaml).unwrap()).unwrap();
    let with_values = bed
        .helm_ok(&[
            "template",
            RELEASE,
            chart_dir,
            "-n",
            RELEASE_NAMESPACE,
            "-f",
            values.to_str().unwrap(),
        ])
        .await;
    assert_eq!(
        by_key(chart::parse_documents(&with_values).unwrap()),
        by_key(chart::manifests(&policy).unwrap()),
        "cluster::chart::manifests differs from helm template -f"
    );
}

#[tokio::test]
async fn helm_lints_the_chart_and_the_api_server_holds_every_manifest_it_installed() {
    let Some(bed) = testbed() else { return };
    let chart_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../charts/banlieue-console");
    bed.helm_ok(&["lint", "--strict", chart_dir]).await;
    let status = bed
        .helm_ok(&["status", RELEASE, "-n", RELEASE_NAMESPACE, "-o", "json"])
        .await;
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["info"]["status"], "deployed", "{status}");

    let manifest = bed
        .helm_ok(&["get", "manifest", RELEASE, "-n", RELEASE_NAMESPACE])
        .await;
    let objects = chart::parse_documents(&manifest).unwrap();
    let client = bed.admin_client().await;
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let mut kinds = Vec::new();
    for object in &objects {
        let types = object.types.as_ref().expect("apiVersion and kind");
        let gvk = GroupVersionKind::try_from(types).unwrap();
        let (resource, caps) = discovery
            .resolve_gvk(&gvk)
            .unwrap_or_else(|| panic!("the API server does not serve {gvk:?}"));
        let api: Api<DynamicObject> = if caps.scope == Scope::Namespaced {
            let ns = object
                .metadata
                .namespace
                .as_deref()
                .unwrap_or(RELEASE_NAMESPACE);
            Api::namespaced_with(client.clone(), ns, &resource)
        } else {
            Api::all_with(client.clone(), &resource)
        };
        let name = object.metadata.name.as_deref().expect("a name");
        let installed = api
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("{} {name} was not installed: {e}", gvk.kind));
        let mut manifest = serde_json::to_value(object).unwrap();
        manifest.as_object_mut().unwrap().remove("metadata");
        let mut installed = serde_json::to_value(installed).unwrap();
        if gvk.kind == "ClusterRole" && name == cluster::impersonable::GROUPS_ROLE {
            // The console adds the custom roles' groups after the chart's (other suites'
            // roles may exist now).
            let chart = &manifest["rules"][0]["resourceNames"];
            let names = installed["rules"][0]["resourceNames"]
                .as_array_mut()
                .unwrap();
            let len = chart.as_array().unwrap().len();
            assert!(names.len() >= len, "{name}: {names:?}");
            names.truncate(len);
        }
        if gvk.kind == "ClusterRole" && name == cluster::impersonable::USERS_ROLE {
            // The console lists its own users (whoever the suites made): console names.
            let names = installed["rules"][0]["resourceNames"]
                .as_array_mut()
                .unwrap();
            assert!(
                !names.is_empty()
                    && names
                        .iter()
                        .all(|n| n.as_str().is_some_and(|n| n.starts_with("console:"))),
                "{name}: {names:?}"
            );
            *names = manifest["rules"][0]["resourceNames"]
                .as_array()
                .unwrap()
                .clone();
        }
        if let Some(difference) = missing_from(&manifest, &installed) {
            panic!(
                "{} {name} is not as helm rendered it: {difference}",
                gvk.kind
            );
        }
        kinds.push(gvk.kind);
    }
    for kind in [
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ] {
        assert!(
            kinds.iter().any(|k| k == kind),
            "no {kind} installed: {kinds:?}"
        );
    }

    // Helm installed the CRDs (crds/) too, and the API server serves them.
    for plural in [
        "virtualmachinepools",
        "virtualmachines",
        "virtualmachineclaims",
    ] {
        assert!(
            discovery
                .groups()
                .flat_map(|g| g.recommended_resources())
                .any(|(r, _)| r.group == "banlieue.io" && r.plural == plural),
            "{plural}.banlieue.io is not served"
        );
    }
}
