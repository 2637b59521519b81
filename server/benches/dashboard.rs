//! The dashboard of a developer whose namespace holds 1,000 claims (all theirs, so every
//! row renders), against the dev cluster (the Kubernetes emulator with the chart), through
//! the whole router: the header's SelfSubjectAccessReview, the pools and claims listed as
//! the person, the reviews for claiming and releasing, render.
//!
//! Prints p50 / p90 / p99 / max of `ROUNDS` page loads after `WARM_UP` (and, as the
//! yardstick of the cluster's round trip, one SelfSubjectAccessReview alone), and exits 1
//! when the p99 is above the target (≤ 50 ms).
//! Run: `cargo bench -p server --bench dashboard`.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use cluster::crd::VirtualMachineClaim;
use kube::Api;
use kube::api::PostParams;
use support::{TestApp, get};

const WARM_UP: usize = 10;
const ROUNDS: usize = 200;
const TARGET_P99: Duration = Duration::from_millis(50);

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (pages, reviews) = runtime.block_on(measure());
    report("dashboard, 1,000 claims", &pages);
    report("one SelfSubjectAccessReview", &reviews);
    if percentile(&pages, 0.99) > TARGET_P99 {
        eprintln!("dashboard: p99 above the target ({TARGET_P99:?})");
        std::process::exit(1);
    }
}

/// Sorted latencies of the page loads and of lone reviews, in turn.
async fn measure() -> (Vec<Duration>, Vec<Duration>) {
    let (app, dev) = TestApp::with_dev_cluster().await;
    let alice = app
        .create_user("alice", "correct horse battery", &["developer"], false)
        .await;
    let alice = cluster::KubernetesIdentity::console(
        alice.name.as_str(),
        alice.roles.iter().map(|r| r.as_str()),
    );
    // Made in the store, not through the Users page: the console may impersonate only
    // the users its list names, so she is put on it before acting as her.
    dev.access
        .update_impersonable_users(cluster::impersonable::users_for(["alice"]))
        .await
        .unwrap();
    let client = dev.access.client_for(&alice).unwrap();
    let claims = Api::<VirtualMachineClaim>::namespaced(client.clone(), "demo");
    for i in 0..1_000 {
        let claim = TestApp::claim_for(&format!("alice-{i:04}"), "alice");
        claims.create(&PostParams::default(), &claim).await.unwrap();
    }
    let cookie = app.sign_in("alice", "correct horse battery").await;

    let mut pages = Vec::with_capacity(ROUNDS);
    let mut reviews = Vec::with_capacity(ROUNDS);
    for round in 0..WARM_UP + ROUNDS {
        let start = Instant::now();
        let page = app.send(get("/", Some(&cookie))).await;
        let took = start.elapsed();
        assert_eq!(page.status, axum::http::StatusCode::OK);
        assert!(page.body.contains("alice-0999"));
        let start = Instant::now();
        cluster::impersonation::may(&client, "virtualmachinepools", "list", None)
            .await
            .unwrap();
        let review = start.elapsed();
        if round >= WARM_UP {
            pages.push(took);
            reviews.push(review);
        }
    }
    pages.sort();
    reviews.sort();
    (pages, reviews)
}

fn report(what: &str, sorted: &[Duration]) {
    println!(
        "{what:<30} p50 {:>8.2?}  p90 {:>8.2?}  p99 {:>8.2?}  max {:>8.2?}  ({} rounds)",
        percentile(sorted, 0.5),
        percentile(sorted, 0.9),
        percentile(sorted, 0.99),
        sorted[sorted.len() - 1],
        sorted.len()
    );
}

/// Nearest-rank percentile (`q` in 0–1) of sorted latencies.
fn percentile(sorted: &[Duration], q: f64) -> Duration {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}
