//! The CRD manifests in `charts/` are generated from the Rust types, and the API server
//! enforces their schemas.

mod common;

use common::{chart_dir, claims, start};
use kube::Api;
use kube::api::PostParams;
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::json;

#[test]
fn charts_crds_are_generated_from_the_types() {
    let dir = chart_dir().join("crds");
    let manifests = cluster::crd::crd_manifests().expect("CRDs serialize");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .expect("charts/banlieue-console/crds exists")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut generated: Vec<String> = manifests.iter().map(|(f, _)| f.clone()).collect();
    generated.sort();
    assert_eq!(
        on_disk,
        generated,
        "stray or missing files in {}",
        dir.display()
    );
    for (file, yaml) in &manifests {
        let current = std::fs::read_to_string(dir.join(file)).unwrap();
        assert!(
            &current == yaml,
            "{file} is stale: run `cargo run -p banlieue-cluster --bin crdgen`"
        );
        // What the dev cluster and the emulator suites install: every CRD.
        assert!(
            cluster::chart::CRDS.contains(&current.as_str()),
            "cluster::chart::CRDS lacks {file}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemas_refuse_bad_claims() {
    let (emu, client) = start().await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("banlieue.io", "v1alpha1", "VirtualMachineClaim"),
        "virtualmachineclaims",
    );
    let raw: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), client.default_namespace(), &ar);
    let bad = [
        ("no subject", json!({"poolRef": "p", "ttlSeconds": 60})),
        (
            "ttl zero",
            json!({"poolRef": "p", "ttlSeconds": 0, "subject": {"issuer": "i", "id": "a"}}),
        ),
        (
            "ttl text",
            json!({"poolRef": "p", "ttlSeconds": "1h", "subject": {"issuer": "i", "id": "a"}}),
        ),
    ];
    for (what, spec) in bad {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "banlieue.io/v1alpha1", "kind": "VirtualMachineClaim",
            "metadata": {"name": "bad"}, "spec": spec,
        }))
        .unwrap();
        match raw.create(&PostParams::default(), &obj).await {
            Err(kube::Error::Api(s)) => assert_eq!(s.code, 422, "{what}: {}", s.message),
            other => panic!("{what}: expected 422, got {other:?}"),
        }
    }
    claims(&client)
        .create(
            &PostParams::default(),
            &common::claim("good", "p", 60, "alice"),
        )
        .await
        .expect("a well-formed claim is accepted");
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemas_refuse_bad_pools() {
    let (emu, client) = start().await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("banlieue.io", "v1alpha1", "VirtualMachinePool"),
        "virtualmachinepools",
    );
    let raw: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), client.default_namespace(), &ar);
    let spec = |memory: &str, provider: &str| {
        json!({
            "warmReplicas": 1, "maxReplicas": 2, "imageRevision": "r1",
            "template": {"cpu": 1, "memory": memory, "image": "img"},
            "providerRef": provider,
        })
    };
    let create = |name: &str, spec: serde_json::Value| {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "banlieue.io/v1alpha1", "kind": "VirtualMachinePool",
            "metadata": {"name": name}, "spec": spec,
        }))
        .unwrap();
        let raw = raw.clone();
        async move { raw.create(&PostParams::default(), &obj).await }
    };
    for (what, spec) in [
        ("memory in words", spec("lots", "simulated")),
        ("negative memory", spec("-1Gi", "simulated")),
        ("unknown suffix", spec("4GB", "simulated")),
        ("provider with capitals", spec("4Gi", "Simulated")),
        ("provider with a slash", spec("4Gi", "a/b")),
    ] {
        match create("bad", spec).await {
            Err(kube::Error::Api(s)) => assert_eq!(s.code, 422, "{what}: {}", s.message),
            other => panic!("{what}: expected 422, got {other:?}"),
        }
    }
    for (name, memory) in [
        ("binary", "512Mi"),
        ("decimal", "1.5G"),
        ("bytes", "1073741824"),
    ] {
        create(name, spec(memory, "simulated"))
            .await
            .unwrap_or_else(|e| panic!("{memory} is a quantity: {e}"));
        assert!(cluster::crd::is_memory_quantity(memory));
    }
    assert!(!cluster::crd::is_memory_quantity("lots"));
    emu.shutdown().await;
}
