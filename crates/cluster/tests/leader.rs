//! Leader election: two replicas, one reconciles; the other takes over when it stops.

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

async fn holder(client: &kube::Client) -> Option<String> {
    Api::<Lease>::default_namespaced(client.clone())
        .get_opt("banlieue-console-controllers")
        .await
        .unwrap()?
        .spec?
        .holder_identity
}

fn bound_claims(metrics: &cluster::Metrics) -> Option<u64> {
    let counts = metrics.claims_by_phase()?;
    counts.iter().find(|(p, _)| *p == "Bound").map(|(_, n)| *n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_reconciles_and_the_other_takes_over() {
    let (emu, client) = start().await;
    let a = spawn_controllers(&client, test_config(&client, "replica-a"));
    let b = spawn_controllers(&client, test_config(&client, "replica-b"));
    create_pool(&client, &pool("p", 1, 4, "r1")).await;
    create_claim(&client, &claim("c1", "p", 600, "alice")).await;
    wait_phase(&client, "c1", "Bound", Duration::from_secs(20)).await;
    let leader = holder(&client).await.expect("a holder");
    let (leading, following) = if leader == "replica-a" {
        (a, b)
    } else {
        (b, a)
    };
    assert!(leading.metrics.reconciles.total() > 0);
    assert_eq!(
        following.metrics.reconciles.total(),
        0,
        "the follower reconciled"
    );
    // Only the leader reports claims by phase, so a sum over replicas counts each once.
    wait_for(
        "the leader counts c1 Bound",
        Duration::from_secs(10),
        || {
            let bound = bound_claims(&leading.metrics);
            async move { (bound == Some(1)).then_some(()) }
        },
    )
    .await;
    assert_eq!(following.metrics.claims_by_phase(), None);
    let exposition = exposition(&leading.metrics);
    assert!(
        exposition
            .lines()
            .any(|l| l == "banlieue_claim_bind_latency_seconds_count 1"),
        "{exposition}"
    );
    let leading_metrics = leading.metrics.clone();

    // The leader shuts down: it releases the Lease and the follower takes over.
    leading.stop().await;
    assert_eq!(leading_metrics.claims_by_phase(), None);
    create_claim(&client, &claim("c2", "p", 600, "alice")).await;
    wait_phase(&client, "c2", "Bound", Duration::from_secs(20)).await;
    assert!(following.metrics.reconciles.total() > 0);
    wait_for(
        "the new leader counts both Bound",
        Duration::from_secs(10),
        || {
            let bound = bound_claims(&following.metrics);
            async move { (bound == Some(2)).then_some(()) }
        },
    )
    .await;
    let now_leading = holder(&client).await.expect("a holder");
    assert_ne!(now_leading, leader);
    following.stop().await;
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controllers_that_failed_at_start_start_again_once_the_cluster_is_ready() {
    if on_testbed() {
        return; // the test bed's CRDs are always there
    }
    // An API server without the CRDs yet: the first runs fail (CrdMissing).
    let emu = Server::Emulator(
        kube_emulator::Emulator::start(kube_emulator::EmulatorConfig::default())
            .await
            .unwrap(),
    );
    let client = admin_client(&emu).await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(cluster::run_controllers_retrying(
        client.clone(),
        test_config(&client, "late"),
        Default::default(),
        async move {
            let _ = stopped.await;
        },
    ));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!running.is_finished(), "a failed start does not end it");
    install_crds(&client).await;
    create_pool(&client, &pool("p", 1, 4, "r1")).await;
    create_claim(&client, &claim("c1", "p", 600, "alice")).await;
    wait_phase(&client, "c1", "Bound", Duration::from_secs(30)).await;
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(20), running)
        .await
        .expect("it stops with the shutdown")
        .unwrap();
    emu.shutdown().await;
}
