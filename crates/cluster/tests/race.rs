//! The bind race (claim design seed, section 3, "two consumers, one member"): 50 claims
//! created at once against 20 Ready members.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use cluster::crd::{CLAIM_LABEL, VirtualMachineClaim};
use common::*;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;

const T: Duration = Duration::from_secs(60);

async fn phases(client: &Client) -> BTreeMap<String, Vec<VirtualMachineClaim>> {
    let mut by_phase: BTreeMap<String, Vec<VirtualMachineClaim>> = BTreeMap::new();
    for c in claims(client)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
    {
        let phase = c
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        by_phase.entry(phase).or_default().push(c);
    }
    by_phase
}

/// Every Bound claim names a distinct member, and that member carries exactly this claim.
async fn assert_one_claim_per_member(client: &Client) -> usize {
    let by_phase = phases(client).await;
    let bound = by_phase.get("Bound").cloned().unwrap_or_default();
    let refs: BTreeSet<String> = bound
        .iter()
        .map(|c| {
            c.status
                .as_ref()
                .unwrap()
                .virtual_machine_ref
                .clone()
                .unwrap()
        })
        .collect();
    assert_eq!(refs.len(), bound.len(), "two claims bound to one member");
    let members: BTreeMap<String, _> = list_vms(client)
        .await
        .into_iter()
        .map(|vm| (vm.name_any(), vm))
        .collect();
    for c in &bound {
        let member = &members[c
            .status
            .as_ref()
            .unwrap()
            .virtual_machine_ref
            .as_ref()
            .unwrap()];
        assert_eq!(member.labels().get(CLAIM_LABEL), Some(&c.name_any()));
    }
    let labelled = members
        .values()
        .filter(|vm| vm.labels().contains_key(CLAIM_LABEL))
        .count();
    assert_eq!(
        labelled,
        bound.len(),
        "a member is claimed by no Bound claim"
    );
    bound.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_claims_against_twenty_ready_members() {
    let (emu, client) = start().await;
    let running = spawn_controllers(&client, test_config(&client, "a"));
    create_pool(&client, &pool("p", 20, 20, "r1")).await;
    wait_for("20 Ready members", T, || async {
        let ready = list_vms(&client)
            .await
            .iter()
            .filter(|vm| vm.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Ready"))
            .count();
        (ready == 20).then_some(())
    })
    .await;

    let creates = (0..50).map(|i| {
        let client = client.clone();
        async move { create_claim(&client, &claim(&format!("c{i:02}"), "p", 3600, "alice")).await }
    });
    futures::future::join_all(creates).await;

    wait_for("20 Bound", T, || async {
        let p = phases(&client).await;
        (p.get("Bound").map_or(0, Vec::len) == 20 && p.get("Pending").map_or(0, Vec::len) == 30)
            .then_some(())
    })
    .await;
    // Several Pending retries later (3 s each) nothing more binds: the pool is at max.
    tokio::time::sleep(Duration::from_secs(7)).await;
    let p = phases(&client).await;
    assert_eq!(p.get("Bound").map_or(0, Vec::len), 20);
    assert_eq!(p.get("Pending").map_or(0, Vec::len), 30);
    // Every member claimed and no room for more: the claims say the pool makes none.
    for c in &p["Pending"] {
        let status = c.status.as_ref().unwrap();
        assert_eq!(status.reason.as_deref(), Some("PoolNotProgressing"));
        assert!(
            status
                .message
                .as_deref()
                .is_some_and(|m| m.contains("MaxReplicasReached")),
            "{status:?}"
        );
    }
    assert_eq!(assert_one_claim_per_member(&client).await, 20);
    assert_eq!(list_vms(&client).await.len(), 20, "maxReplicas respected");

    // Room for the rest: the pool refills and the Pending claims bind as members get Ready.
    pools(&client)
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"maxReplicas": 60}})),
        )
        .await
        .unwrap();
    wait_for("50 Bound", T, || async {
        let p = phases(&client).await;
        (p.get("Bound").map_or(0, Vec::len) == 50).then_some(())
    })
    .await;
    assert_eq!(assert_one_claim_per_member(&client).await, 50);
    assert!(list_vms(&client).await.len() <= 60);
    // Every successful member patch is one of the 50 binds: no member was taken twice, even
    // transiently; the losers of the race got 409s.
    assert_eq!(running.metrics.binds.get(), 50);
    // One bind-latency observation per claim, at its first `phase: Bound` (the status write
    // lands just before the observation: poll).
    wait_for("50 bind latencies", T, || {
        let text = exposition(&running.metrics);
        async move {
            text.lines()
                .any(|l| l == "banlieue_claim_bind_latency_seconds_count 50")
                .then_some(())
        }
    })
    .await;
    running.stop().await;
    emu.shutdown().await;
}
