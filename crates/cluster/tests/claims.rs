//! Every transition of the claim state machine (claim design seed, section 4), with the
//! controllers running against the emulator over HTTPS.

mod common;

use std::time::{Duration, Instant};

use cluster::crd::{
    BOUND_AT_ANNOTATION, CLAIM_LABEL, SUBJECT_ID_ANNOTATION, SUBJECT_ISSUER_ANNOTATION,
};
use common::*;
use kube::ResourceExt;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

const T: Duration = Duration::from_secs(15);

fn seconds(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> i64 {
    t.0.as_second()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_until_capacity_then_bound_with_the_full_ttl_from_bind() {
    let (emu, client) = start().await;
    let running = spawn_controllers(&client, test_config(&client, "a"));
    let created = create_claim(&client, &claim("c1", "p1", 3600, "alice")).await;
    let pending = wait_phase(&client, "c1", "Pending", T).await;
    let status = pending.status.unwrap();
    assert_eq!(status.reason.as_deref(), Some("PoolNotFound"));
    assert!(status.message.unwrap().contains("p1"));
    // Wait a while Pending: the TTL must still be counted from the bind.
    tokio::time::sleep(Duration::from_secs(2)).await;
    create_pool(&client, &pool("p1", 1, 2, "r1")).await;
    let bound = wait_phase(&client, "c1", "Bound", T).await;
    let status = bound.status.clone().unwrap();
    let bound_at = seconds(status.bound_at.as_ref().unwrap());
    let expires_at = seconds(status.expires_at.as_ref().unwrap());
    let created_at = seconds(created.metadata.creation_timestamp.as_ref().unwrap());
    assert!(
        bound_at >= created_at + 2,
        "boundAt {bound_at} created {created_at}"
    );
    assert_eq!(
        expires_at - bound_at,
        3600,
        "expiresAt = boundAt + ttlSeconds"
    );
    assert_eq!(status.reason, None);
    // The member: labelled, annotated, re-parented to the claim.
    let member_name = status.virtual_machine_ref.clone().unwrap();
    let member = vms(&client).get(&member_name).await.unwrap();
    assert_eq!(
        member.labels().get(CLAIM_LABEL).map(String::as_str),
        Some("c1")
    );
    assert_eq!(
        member
            .annotations()
            .get(SUBJECT_ID_ANNOTATION)
            .map(String::as_str),
        Some("alice")
    );
    assert_eq!(
        member
            .annotations()
            .get(SUBJECT_ISSUER_ANNOTATION)
            .map(String::as_str),
        Some(ISSUER)
    );
    assert!(member.annotations().contains_key(BOUND_AT_ANNOTATION));
    let owners = member.owner_references();
    assert_eq!(owners.len(), 1);
    assert_eq!(
        (owners[0].kind.as_str(), owners[0].uid.as_str()),
        ("VirtualMachineClaim", bound.uid().unwrap().as_str())
    );
    assert_eq!(status.addresses, member.status.unwrap().addresses);
    assert!(!status.addresses.is_empty(), "addresses mirrored");
    assert!(
        bound
            .finalizers()
            .iter()
            .any(|f| f == "banlieue.io/claim-protection")
    );

    // Hold mirrors address changes.
    vms(&client)
        .patch_status(
            &member_name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"addresses": [{"type": "InternalIP", "address": "192.0.2.7"}]}}),
            ),
        )
        .await
        .unwrap();
    wait_for("addresses mirrored", T, || async {
        let c = claims(&client).get("c1").await.ok()?;
        let a = c.status?.addresses;
        (a.len() == 1 && a[0].address == "192.0.2.7").then_some(())
    })
    .await;
    // The TTL is never extended by later passes.
    let later = claims(&client).get("c1").await.unwrap().status.unwrap();
    assert_eq!(later.bound_at, status.bound_at);
    assert_eq!(later.expires_at, status.expires_at);
    running.stop().await;
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_pending_claim_removes_it() {
    let (emu, client) = start().await;
    create_pool(&client, &pool("empty", 0, 0, "r1")).await;
    let running = spawn_controllers(&client, test_config(&client, "a"));
    create_claim(&client, &claim("c1", "empty", 60, "alice")).await;
    // Until the simulated provider has registered, the pool (and so the claim) may say
    // ProviderNotFound; once it has, a healthy empty pool leaves the claim NoReadyMember.
    let api = claims(&client);
    wait_for("claim c1 Pending with NoReadyMember", T, || {
        let api = api.clone();
        async move {
            let status = api.get_opt("c1").await.ok()??.status?;
            (status.phase.as_deref() == Some("Pending")
                && status.reason.as_deref() == Some("NoReadyMember"))
            .then_some(())
        }
    })
    .await;
    claims(&client)
        .delete("c1", &DeleteParams::default())
        .await
        .unwrap();
    wait_gone(&claims(&client), "c1", T).await;
    assert!(list_vms(&client).await.is_empty());
    running.stop().await;
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vanished_member_fails_the_claim_even_with_another_ready() {
    let (emu, client) = start().await;
    let running = spawn_controllers(&client, test_config(&client, "a"));
    create_pool(&client, &pool("p1", 2, 4, "r1")).await;
    create_claim(&client, &claim("c1", "p1", 3600, "alice")).await;
    let bound = wait_phase(&client, "c1", "Bound", T).await;
    let member = bound.status.unwrap().virtual_machine_ref.unwrap();
    vms(&client)
        .delete(&member, &DeleteParams::default())
        .await
        .unwrap();
    let failed = wait_phase(&client, "c1", "Failed", T).await;
    let status = failed.status.unwrap();
    assert_eq!(status.reason.as_deref(), Some("VirtualMachineGone"));
    assert_eq!(status.virtual_machine_ref.as_deref(), Some(member.as_str()));
    // Another member is Ready and stays unclaimed: the claim is never rebound.
    wait_for("a Ready unclaimed member", T, || async {
        list_vms(&client).await.into_iter().find(|vm| {
            vm.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Ready")
                && !vm.labels().contains_key(CLAIM_LABEL)
        })
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let still = claims(&client).get("c1").await.unwrap().status.unwrap();
    assert_eq!(still.phase.as_deref(), Some("Failed"));
    assert_eq!(still.virtual_machine_ref.as_deref(), Some(member.as_str()));
    assert!(
        list_vms(&client)
            .await
            .iter()
            .all(|vm| !vm.labels().contains_key(CLAIM_LABEL))
    );
    // Failed → Releasing → gone on deletion.
    claims(&client)
        .delete("c1", &DeleteParams::default())
        .await
        .unwrap();
    wait_gone(&claims(&client), "c1", T).await;
    running.stop().await;
    emu.shutdown().await;
}

/// Polls until both are gone, asserting at every poll that the claim never disappears
/// while its member still exists (the claim is read first, so "claim gone, then member
/// still there" is a real violation of the release ordering).
async fn assert_gone_in_order(client: &kube::Client, claim: &str, member: &str) {
    let start = Instant::now();
    loop {
        assert!(start.elapsed() < T, "claim or member never went away");
        let claim_exists = claims(client).get_opt(claim).await.unwrap().is_some();
        let member_exists = vms(client).get_opt(member).await.unwrap().is_some();
        assert!(
            claim_exists || !member_exists,
            "the claim is gone while its member {member} still exists"
        );
        if !claim_exists {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_destroys_the_member_then_deletes_the_claim() {
    let (emu, client) = start().await;
    // Long enough that the poll below sees the claim Releasing before its member is gone.
    let mut config = test_config(&client, "a");
    config.simulated_provider.as_mut().unwrap().destroy_after = Duration::from_secs(3);
    let running = spawn_controllers(&client, config);
    create_pool(&client, &pool("p1", 1, 2, "r1")).await;
    create_claim(&client, &claim("c1", "p1", 2, "alice")).await;
    let bound = wait_phase(&client, "c1", "Bound", T).await;
    let member = bound.status.unwrap().virtual_machine_ref.unwrap();
    let releasing = wait_phase(&client, "c1", "Releasing", T).await;
    assert_eq!(releasing.status.unwrap().reason.as_deref(), Some("Expired"));
    assert_gone_in_order(&client, "c1", &member).await;
    running.stop().await;
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_keeps_the_claim_until_its_member_is_gone() {
    let (emu, client) = start().await;
    let mut config = test_config(&client, "a");
    config.simulated_provider.as_mut().unwrap().destroy_after = Duration::from_secs(4);
    let running = spawn_controllers(&client, config);
    create_pool(&client, &pool("p1", 1, 2, "r1")).await;
    create_claim(&client, &claim("c1", "p1", 3600, "alice")).await;
    let bound = wait_phase(&client, "c1", "Bound", T).await;
    let member = bound.status.unwrap().virtual_machine_ref.unwrap();
    claims(&client)
        .delete("c1", &DeleteParams::default())
        .await
        .unwrap();
    let releasing = wait_phase(&client, "c1", "Releasing", T).await;
    assert_eq!(
        releasing.status.unwrap().reason.as_deref(),
        Some("Released")
    );
    let terminating = vms(&client).get(&member).await.unwrap();
    assert!(
        terminating.metadata.deletion_timestamp.is_some(),
        "member is being destroyed"
    );
    assert_gone_in_order(&client, "c1", &member).await;
    running.stop().await;
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_pool_spares_the_claimed_member() {
    let (emu, client) = start().await;
    let running = spawn_controllers(&client, test_config(&client, "a"));
    create_pool(&client, &pool("p1", 2, 4, "r1")).await;
    create_claim(&client, &claim("c1", "p1", 3600, "alice")).await;
    let bound = wait_phase(&client, "c1", "Bound", T).await;
    let member = bound.status.unwrap().virtual_machine_ref.unwrap();
    // Let the pool refill so there are unclaimed members for GC to take.
    wait_for("an unclaimed Ready member", T, || async {
        list_vms(&client).await.into_iter().find(|vm| {
            vm.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Ready")
                && !vm.labels().contains_key(CLAIM_LABEL)
        })
    })
    .await;
    pools(&client)
        .delete("p1", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("only the claimed member left", T, || async {
        let left = list_vms(&client).await;
        (left.len() == 1).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let left = list_vms(&client).await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].name_any(), member);
    assert!(left[0].metadata.deletion_timestamp.is_none());
    let claim = claims(&client).get("c1").await.unwrap();
    assert_eq!(claim.status.unwrap().phase.as_deref(), Some("Bound"));
    running.stop().await;
    emu.shutdown().await;
}
