//! The member index and the shortcuts around it (issue 20) keep the claim rules: a bind
//! that fails after its member patch hides no free member, and a finalizer removed by
//! hand neither binds a second member nor fails a Bound claim.

mod common;

use std::sync::Arc;
use std::time::Duration;

use cluster::Metrics;
use cluster::claim::{ClaimContext, reconcile_claim};
use cluster::crd::{CLAIM_FINALIZER, CLAIM_LABEL};
use cluster::member_index::MemberIndex;
use common::*;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

const T: Duration = Duration::from_secs(20);

async fn holders(client: &Client, claim: &str) -> Vec<String> {
    let mut v: Vec<String> = vms(client)
        .list(&ListParams::default().labels(&format!("{CLAIM_LABEL}={claim}")))
        .await
        .unwrap()
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    v.sort();
    v
}

fn ar(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "admissionregistration.k8s.io".into(),
        version: "v1".into(),
        api_version: "admissionregistration.k8s.io/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// A ValidatingAdmissionPolicy that refuses every status write of claim `name` (422), as
/// any non-409/404 failure of the bind's status write would (5xx, 429, timeout, webhook).
async fn refuse_status_writes_of(client: &Client, name: &str) {
    let policy: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "refuse-status"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["banlieue.io"], "apiVersions": ["*"],
                "operations": ["UPDATE"], "resources": ["virtualmachineclaims/status"]}]},
            "validations": [{"expression": format!("object.metadata.name != '{name}'"), "message": "injected failure"}]
        }
    }))
    .unwrap();
    Api::<DynamicObject>::all_with(
        client.clone(),
        &ar("ValidatingAdmissionPolicy", "validatingadmissionpolicies"),
    )
    .create(&PostParams::default(), &policy)
    .await
    .expect("policy");
    let binding: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "refuse-status"},
        "spec": {"policyName": "refuse-status", "validationActions": ["Deny"]}
    }))
    .unwrap();
    Api::<DynamicObject>::all_with(
        client.clone(),
        &ar(
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
        ),
    )
    .create(&PostParams::default(), &binding)
    .await
    .expect("binding");
}

async fn phase(client: &Client, name: &str) -> Option<String> {
    claims(client)
        .get(name)
        .await
        .unwrap()
        .status
        .and_then(|s| s.phase)
}

/// A bind whose member patch lands and whose status write fails (any failure but a
/// race: 5xx, 429, timeout, admission): the member goes back into the index as the cache
/// has it now (claimed), so it never hides the pool's free members from later claims.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_status_write_hides_no_free_member() {
    // A cluster-wide policy would reach the shared test bed's other suites.
    if on_testbed() {
        return;
    }
    let (emu, client) = start().await;
    let p = create_pool(&client, &pool("p", 2, 2, "r1")).await;
    ready_member(&client, &p, "m-a", "r1", 100).await;
    ready_member(&client, &p, "m-b", "r1", 50).await;
    refuse_status_writes_of(&client, "c-doomed").await;
    let mut config = test_config(&client, "a");
    config.simulated_provider = None;
    let running = spawn_controllers(&client, config);

    create_claim(&client, &claim("c-doomed", "p", 3600, "alice")).await;
    wait_for("m-a taken by c-doomed", T, || async {
        (holders(&client, "c-doomed").await == ["m-a"]).then_some(())
    })
    .await;
    create_claim(&client, &claim("c-ok", "p", 3600, "bob")).await;
    let bound = wait_phase(&client, "c-ok", "Bound", T).await;
    assert_eq!(
        bound.status.unwrap().virtual_machine_ref.as_deref(),
        Some("m-b")
    );
    running.stop().await;
    emu.shutdown().await;
}

/// A bind whose member patch landed but whose status write did not (the state
/// `already_taken` exists for), then the finalizer is removed by hand (kubectl patch): the
/// next pass adds the finalizer again and still finds the member it holds, binding no
/// second one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_finalizer_after_an_interrupted_bind_binds_no_second_member() {
    let (emu, client) = start().await;
    let p = create_pool(&client, &pool("p", 2, 2, "r1")).await;
    ready_member(&client, &p, "m-a", "r1", 100).await;
    ready_member(&client, &p, "m-b", "r1", 50).await;
    let c = create_claim(&client, &claim("c", "p", 3600, "alice")).await;
    // The controller's first pass: the finalizer.
    claims(&client)
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": [CLAIM_FINALIZER]}})),
        )
        .await
        .unwrap();
    // Its member patch lands (label + ownerReference), its status write does not.
    vms(&client)
        .patch(
            "m-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {
                "labels": {CLAIM_LABEL: "c"},
                "ownerReferences": [{"apiVersion": "banlieue.io/v1alpha1", "kind": "VirtualMachineClaim",
                    "name": "c", "uid": c.uid().unwrap(), "controller": true, "blockOwnerDeletion": true}],
            }})),
        )
        .await
        .unwrap();
    // Someone removes the finalizer.
    let live = claims(&client)
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    assert!(live.finalizers().is_empty());
    let members = frozen_cache(&vms(&client)).await;
    let ctx = Arc::new(ClaimContext {
        client: client.clone(),
        members_index: Arc::new(MemberIndex::of(&members)),
        members,
        pools: frozen_cache(&pools(&client)).await,
        providers: frozen_cache(&providers(&client)).await,
        metrics: Arc::new(Metrics::default()),
    });
    reconcile_claim(Arc::new(live), ctx)
        .await
        .expect("reconcile");
    assert_eq!(holders(&client, "c").await, ["m-a"]);
    let status = claims(&client).get("c").await.unwrap().status.unwrap();
    assert_eq!(status.virtual_machine_ref.as_deref(), Some("m-a"));
    emu.shutdown().await;
}

/// A Bound claim whose finalizer is removed by hand: the next pass adds it again and the
/// claim stays Bound to its member.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_finalizer_on_a_bound_claim_keeps_it_bound() {
    let (emu, client) = start().await;
    let p = create_pool(&client, &pool("p", 1, 1, "r1")).await;
    ready_member(&client, &p, "m-a", "r1", 100).await;
    let mut config = test_config(&client, "a");
    config.simulated_provider = None;
    let running = spawn_controllers(&client, config);
    create_claim(&client, &claim("c", "p", 3600, "alice")).await;
    wait_phase(&client, "c", "Bound", T).await;
    claims(&client)
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    wait_for("the finalizer added again", T, || async {
        let c = claims(&client).get("c").await.unwrap();
        c.finalizers()
            .iter()
            .any(|f| f == CLAIM_FINALIZER)
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(phase(&client, "c").await.as_deref(), Some("Bound"));
    assert_eq!(holders(&client, "c").await, ["m-a"]);
    running.stop().await;
    emu.shutdown().await;
}
