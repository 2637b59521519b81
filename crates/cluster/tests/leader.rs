//! Leader election: two replicas, one reconciles; the other takes over when it stops.

mod common;

use std::time::Duration;

use cluster::Metrics;
use common::*;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

async fn holder(client: &kube::Client) -> Option<String> {
    Api::<Lease>::namespaced(client.clone(), NS)
        .get_opt("banlieue-console-controllers")
        .await
        .unwrap()?
        .spec?
        .holder_identity
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_reconciles_and_the_other_takes_over() {
    let (emu, client) = start().await;
    let a = spawn_controllers(&client, test_config("replica-a"));
    let b = spawn_controllers(&client, test_config("replica-b"));
    create_pool(&client, &pool("p", 1, 4, "r1")).await;
    create_claim(&client, &claim("c1", "p", 600, "alice")).await;
    wait_phase(&client, "c1", "Bound", Duration::from_secs(20)).await;
    let leader = holder(&client).await.expect("a holder");
    let (leading, following) = if leader == "replica-a" {
        (a, b)
    } else {
        (b, a)
    };
    assert!(Metrics::get(&leading.metrics.reconciles) > 0);
    assert_eq!(
        Metrics::get(&following.metrics.reconciles),
        0,
        "the follower reconciled"
    );

    // The leader shuts down: it releases the Lease and the follower takes over.
    leading.stop().await;
    create_claim(&client, &claim("c2", "p", 600, "alice")).await;
    wait_phase(&client, "c2", "Bound", Duration::from_secs(20)).await;
    assert!(Metrics::get(&following.metrics.reconciles) > 0);
    let now_leading = holder(&client).await.expect("a holder");
    assert_ne!(now_leading, leader);
    following.stop().await;
    emu.shutdown().await;
}
