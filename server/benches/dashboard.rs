//! The dashboard of a developer whose namespace holds 1,000 claims (all theirs, so every
//! row renders), against the dev cluster (the Kubernetes emulator with the chart), through
//! the whole router: list pools and claims as the person, one SelfSubjectAccessReview,
//! render. Target: p99 ≤ 50 ms (criterion prints the distribution; read the upper bound).
//! Run: `cargo bench -p server --bench dashboard`.

#[path = "../tests/support/mod.rs"]
mod support;

use cluster::crd::VirtualMachineClaim;
use criterion::{Criterion, criterion_group, criterion_main};
use kube::Api;
use kube::api::PostParams;
use support::{TestApp, get};

fn dashboard(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (app, _dev, cookie) = runtime.block_on(async {
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
            .update_impersonable_users(["alice"])
            .await
            .unwrap();
        let client = dev.access.client_for(&alice).unwrap();
        let claims = Api::<VirtualMachineClaim>::namespaced(client, "demo");
        for i in 0..1_000 {
            let claim = TestApp::claim_for(&format!("alice-{i:04}"), "alice");
            claims.create(&PostParams::default(), &claim).await.unwrap();
        }
        let cookie = app.sign_in("alice", "correct horse battery").await;
        (app, dev, cookie)
    });
    let mut group = c.benchmark_group("dashboard_1000_claims");
    group.sample_size(50);
    group.bench_function("render", |b| {
        b.to_async(&runtime).iter(|| async {
            let page = app.send(get("/", Some(&cookie))).await;
            assert_eq!(page.status, axum::http::StatusCode::OK);
            assert!(page.body.contains("alice-0999"));
            page
        })
    });
    group.finish();
}

criterion_group!(benches, dashboard);
criterion_main!(benches);
