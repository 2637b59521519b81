//! Deletion semantics (ownerReference garbage collection with each propagation policy,
//! namespace termination) and snapshot persistence.

mod common;

use std::time::Duration;

use common::{api_error, start};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};
use kube_emulator::EmulatorConfig;
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(20);

async fn eventually<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = std::time::Instant::now();
    while start.elapsed() < DEADLINE {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn owner_and_dependent(cms: &Api<ConfigMap>, suffix: &str) -> (ConfigMap, ConfigMap) {
    let owner: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": format!("owner-{suffix}")}})).unwrap();
    let owner = cms.create(&PostParams::default(), &owner).await.unwrap();
    let dep: ConfigMap = serde_json::from_value(json!({"metadata": {
        "name": format!("dep-{suffix}"),
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": owner.name_any(), "uid": owner.uid().unwrap(), "blockOwnerDeletion": true}]
    }}))
    .unwrap();
    let dep = cms.create(&PostParams::default(), &dep).await.unwrap();
    (owner, dep)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_collection_follows_propagation_policy() {
    let (emu, client) = start(EmulatorConfig::default()).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

    let (owner, dep) = owner_and_dependent(&cms, "bg").await;
    cms.delete(&owner.name_any(), &DeleteParams::background())
        .await
        .unwrap();
    eventually("background GC", || async {
        cms.get_opt(&dep.name_any()).await.unwrap().is_none()
    })
    .await;

    let (owner, dep) = owner_and_dependent(&cms, "orphan").await;
    cms.delete(&owner.name_any(), &DeleteParams::orphan())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let kept = cms
        .get(&dep.name_any())
        .await
        .expect("orphaned dependent stays");
    assert!(
        kept.metadata
            .owner_references
            .unwrap_or_default()
            .is_empty(),
        "owner reference removed"
    );

    let (owner, dep) = owner_and_dependent(&cms, "fg").await;
    // Keep the dependent around for a moment with a finalizer, so the owner must wait.
    let mut d = cms.get(&dep.name_any()).await.unwrap();
    d.metadata.finalizers = Some(vec!["test/hold".into()]);
    cms.replace(&dep.name_any(), &PostParams::default(), &d)
        .await
        .unwrap();
    cms.delete(&owner.name_any(), &DeleteParams::foreground())
        .await
        .unwrap();
    let waiting = cms
        .get(&owner.name_any())
        .await
        .expect("owner waits for dependents");
    assert!(waiting.metadata.deletion_timestamp.is_some());
    assert!(
        waiting
            .finalizers()
            .iter()
            .any(|f| f == "foregroundDeletion")
    );
    eventually("dependent marked for deletion", || async {
        cms.get(&dep.name_any())
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    })
    .await;
    let mut d = cms.get(&dep.name_any()).await.unwrap();
    d.metadata.finalizers = None;
    cms.replace(&dep.name_any(), &PostParams::default(), &d)
        .await
        .unwrap();
    eventually("owner gone after its dependents", || async {
        cms.get_opt(&owner.name_any()).await.unwrap().is_none()
    })
    .await;
    assert!(cms.get_opt(&dep.name_any()).await.unwrap().is_none());

    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_deletion_removes_contents_then_namespace() {
    let (emu, client) = start(EmulatorConfig::default()).await;
    let nss: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "tmp"}})).unwrap();
    nss.create(&PostParams::default(), &ns).await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "tmp");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    nss.delete("tmp", &DeleteParams::default()).await.unwrap();
    let (code, reason, _) = api_error(
        cms.create(
            &PostParams::default(),
            &serde_json::from_value::<ConfigMap>(json!({"metadata": {"name": "y"}})).unwrap(),
        )
        .await,
    );
    assert!(
        (code == 403 && reason == "Forbidden") || code == 404,
        "{code} {reason}"
    );
    eventually("namespace gone", || async {
        nss.get_opt("tmp").await.unwrap().is_none()
    })
    .await;
    let (code, _, _) = api_error(cms.get("x").await);
    assert_eq!(code, 404);
    emu.shutdown().await;
}

/// The CA and token lines of a kubeconfig.
fn credentials(kubeconfig: &str) -> Vec<String> {
    kubeconfig
        .lines()
        .filter(|l| l.contains("certificate-authority-data") || l.contains("token:"))
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_keeps_objects_and_crds_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let identity = dir.path().join("identity.json");
    let config = || EmulatorConfig {
        state_file: Some(state.clone()),
        identity_file: Some(identity.clone()),
        ..EmulatorConfig::default()
    };
    let (emu, client) = start(config()).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "kept"}, "data": {"a": "b"}})).unwrap();
    let before = cms.create(&PostParams::default(), &cm).await.unwrap();
    let crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
        serde_yaml::from_str(include_str!("fixtures/crd.yaml")).unwrap();
    Api::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let emu_kubeconfig = credentials(&emu.kubeconfig_yaml());
    emu.shutdown().await;
    assert!(state.exists());

    let first_kubeconfig = emu_kubeconfig.clone();
    let (emu, client) = start(config()).await;
    assert_eq!(
        credentials(&emu.kubeconfig_yaml()),
        first_kubeconfig,
        "same CA and token after a restart"
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let after = cms.get("kept").await.expect("object survived the restart");
    assert_eq!(after.uid(), before.uid());
    let ar = kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("banlieue.io", "v1alpha1", "VirtualMachineClaim"),
        "virtualmachineclaims",
    );
    let claims: Api<kube::core::DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &ar);
    assert!(
        claims
            .list(&Default::default())
            .await
            .expect("CRD still served")
            .items
            .is_empty()
    );
    let next = cms
        .create(
            &PostParams::default(),
            &serde_json::from_value::<ConfigMap>(json!({"metadata": {"name": "new"}})).unwrap(),
        )
        .await
        .unwrap();
    let rv = |c: &ConfigMap| c.resource_version().unwrap().parse::<u64>().unwrap();
    assert!(
        rv(&next) > rv(&after),
        "resourceVersion keeps increasing after a restart"
    );
    emu.shutdown().await;
}
