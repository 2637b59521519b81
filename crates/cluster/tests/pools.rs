//! The pool controller: warm members, maxReplicas counting claimed ones, and image-revision
//! replacement of unclaimed members only.

mod common;

use std::time::Duration;

use cluster::crd::CLAIM_LABEL;
use common::*;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde_json::json;

const T: Duration = Duration::from_secs(20);

fn ready(vm: &cluster::crd::VirtualMachine) -> bool {
    vm.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Ready")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_image_revision_replaces_only_unclaimed_members() {
    let (emu, client) = start().await;
    let running = spawn_controllers(&client, test_config(&client, "a"));
    create_pool(&client, &pool("p", 2, 4, "r1")).await;
    create_claim(&client, &claim("c1", "p", 3600, "alice")).await;
    let bound = wait_phase(&client, "c1", "Bound", T).await;
    let held = bound.status.unwrap().virtual_machine_ref.unwrap();
    // Warm again: 2 Ready unclaimed beside the claimed one.
    wait_for("2 warm + 1 claimed", T, || async {
        let vms = list_vms(&client).await;
        let warm = vms
            .iter()
            .filter(|vm| ready(vm) && !vm.labels().contains_key(CLAIM_LABEL))
            .count();
        (warm == 2 && vms.len() == 3).then_some(())
    })
    .await;
    // The pool's status follows its members on the controller's next reconcile.
    wait_for("pool status 2 ready, 1 claimed, 3 replicas", T, || async {
        let status = pools(&client).get("p").await.unwrap().status?;
        ((
            status.ready_replicas,
            status.claimed_replicas,
            status.replicas,
        ) == (2, 1, 3))
            .then_some(())
    })
    .await;

    pools(&client)
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"imageRevision": "r2"}})),
        )
        .await
        .unwrap();
    wait_for("unclaimed members on r2", T, || async {
        let vms = list_vms(&client).await;
        let fresh = vms
            .iter()
            .filter(|vm| {
                ready(vm)
                    && !vm.labels().contains_key(CLAIM_LABEL)
                    && vm.status.as_ref().unwrap().image_revision.as_deref() == Some("r2")
            })
            .count();
        (fresh == 2 && vms.len() == 3).then_some(())
    })
    .await;
    // The claimed member kept its old revision and its claim.
    let kept = vms(&client).get(&held).await.unwrap();
    assert_eq!(kept.spec.image_revision, "r1");
    assert!(kept.metadata.deletion_timestamp.is_none());
    let claim = claims(&client).get("c1").await.unwrap().status.unwrap();
    assert_eq!(claim.phase.as_deref(), Some("Bound"));
    assert!(list_vms(&client).await.len() <= 4);
    running.stop().await;
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shrinking_a_pool_deletes_surplus_unclaimed_members_only() {
    let (emu, client) = start().await;
    let running = spawn_controllers(&client, test_config(&client, "a"));
    create_pool(&client, &pool("p", 3, 5, "r1")).await;
    create_claim(&client, &claim("c1", "p", 3600, "alice")).await;
    let held = wait_phase(&client, "c1", "Bound", T)
        .await
        .status
        .unwrap()
        .virtual_machine_ref
        .unwrap();
    wait_for("3 warm + 1 claimed", T, || async {
        let vms = list_vms(&client).await;
        let warm = vms
            .iter()
            .filter(|vm| ready(vm) && !vm.labels().contains_key(CLAIM_LABEL))
            .count();
        (warm == 3 && vms.len() == 4).then_some(())
    })
    .await;

    pools(&client)
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"warmReplicas": 1, "maxReplicas": 2}})),
        )
        .await
        .unwrap();
    wait_for("1 warm + 1 claimed", T, || async {
        let vms = list_vms(&client).await;
        let alive: Vec<_> = vms
            .iter()
            .filter(|vm| vm.metadata.deletion_timestamp.is_none())
            .collect();
        (alive.len() == 2).then_some(())
    })
    .await;
    let kept = vms(&client).get(&held).await.unwrap();
    assert!(
        kept.metadata.deletion_timestamp.is_none(),
        "the claimed member stays"
    );
    let claim = claims(&client).get("c1").await.unwrap().status.unwrap();
    assert_eq!(claim.phase.as_deref(), Some("Bound"));
    running.stop().await;
    emu.shutdown().await;
}
