//! Cases from public reports against similar controllers: stale caches hiding the
//! controller's own writes, a pool whose members never become Ready, and deletions racing
//! binds. Reconcile passes are driven directly where the case needs a precise interleaving.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cluster::Metrics;
use cluster::claim::{ClaimContext, reconcile_claim};
use cluster::crd::{CLAIM_FINALIZER, CLAIM_LABEL, VirtualMachinePool};
use cluster::member_index::MemberIndex;
use cluster::pool::{PoolContext, reconcile_pool};
use common::*;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;

const T: Duration = Duration::from_secs(20);

/// A context over frozen caches, with no memory of earlier passes (as after a restart or
/// on another replica).
async fn frozen_context(client: &Client) -> Arc<ClaimContext> {
    let members = frozen_cache(&vms(client)).await;
    Arc::new(ClaimContext {
        client: client.clone(),
        members_index: Arc::new(MemberIndex::of(&members)),
        members,
        pools: frozen_cache(&pools(client)).await,
        providers: frozen_cache(&providers(client)).await,
        metrics: Arc::new(Metrics::default()),
    })
}

async fn members_of(client: &Client, claim: &str) -> Vec<String> {
    vms(client)
        .list(&ListParams::default().labels(&format!("{CLAIM_LABEL}={claim}")))
        .await
        .unwrap()
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect()
}

/// Case 1: three passes in a row on a claim object whose cached copy never shows the
/// controller's own writes (no status, no bound member), with a member cache that still
/// shows every member free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_cache_never_binds_a_second_member() {
    let (emu, client) = start().await;
    let p = create_pool(&client, &pool("p", 3, 3, "r1")).await;
    for (i, name) in ["m-a", "m-b", "m-c"].iter().enumerate() {
        ready_member(&client, &p, name, "r1", 100 - i as i64).await;
    }
    create_claim(&client, &claim("c", "p", 600, "alice")).await;
    // The cache has seen our finalizer, and nothing we write after it.
    let stale = claims(&client)
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": [CLAIM_FINALIZER]}})),
        )
        .await
        .unwrap();
    let stale = Arc::new(stale);
    // Member and pool caches as they were before any write; never updated.
    let frozen = frozen_context(&client).await;
    let mut first_ref = None;
    let mut first_bound_at = None;
    for pass in 1..=3 {
        // No memory of earlier passes either (as after a restart or on another replica).
        let ctx = Arc::new(ClaimContext {
            members_index: Arc::new(MemberIndex::of(&frozen.members)),
            ..(*frozen).clone()
        });
        reconcile_claim(stale.clone(), ctx)
            .await
            .expect("reconcile");
        let status = claims(&client).get("c").await.unwrap().status.unwrap();
        assert_eq!(status.phase.as_deref(), Some("Bound"), "pass {pass}");
        let reference = status.virtual_machine_ref.clone().unwrap();
        let first = first_ref.get_or_insert(reference.clone());
        assert_eq!(
            &reference, first,
            "virtualMachineRef changed on pass {pass}"
        );
        let bound_at = first_bound_at.get_or_insert(status.bound_at.clone());
        assert_eq!(&status.bound_at, bound_at, "boundAt moved on pass {pass}");
        assert_eq!(
            members_of(&client, "c").await,
            vec![reference],
            "pass {pass}"
        );
    }
    emu.shutdown().await;
}

/// Case 2: warm 3 / max 5 whose members never become Ready, for a long run with a fast
/// resync, a second, lagging reconciler working from the pool object as first seen, and
/// an image-revision change that replaces the unclaimed members. Never more than 5
/// members counting terminating ones; no replacement loop; `Progressing=False` reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_ready_pool_stays_within_max_and_reports_no_progress() {
    let (emu, client) = start().await;
    let mut config = test_config(&client, "a");
    config.pool_resync = Duration::from_millis(100);
    config.simulated_provider.as_mut().unwrap().ready_after = None;
    config.simulated_provider.as_mut().unwrap().destroy_after = Duration::from_millis(700);
    let running = spawn_controllers(&client, config);
    let mut spec = pool("p", 3, 5, "r1");
    spec.spec.progress_deadline_seconds = Some(2);
    let first_seen: Arc<VirtualMachinePool> = Arc::new(create_pool(&client, &spec).await);

    // The lagging reconciler: the pool as first seen, passes every 30 ms.
    let lag_ctx = Arc::new(PoolContext {
        client: client.clone(),
        resync: Duration::from_millis(100),
        members: None,
        providers: frozen_cache(&providers(&client)).await,
        metrics: Arc::new(Metrics::default()),
    });
    let (stop_lag, mut lag_stopped) = tokio::sync::oneshot::channel::<()>();
    let lagging = tokio::spawn({
        let pool = first_seen.clone();
        async move {
            loop {
                if lag_stopped.try_recv().is_ok() {
                    return;
                }
                reconcile_pool(pool.clone(), lag_ctx.clone())
                    .await
                    .expect("lagging pass");
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
        }
    });

    let mut seen = BTreeSet::new();
    let mut most = 0;
    let sample = |items: Vec<cluster::crd::VirtualMachine>,
                  seen: &mut BTreeSet<String>,
                  most: &mut usize| {
        *most = (*most).max(items.len());
        seen.extend(items.iter().map(|vm| vm.uid().unwrap()));
    };
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(8) {
        sample(list_vms(&client).await, &mut seen, &mut most);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = stop_lag.send(());
    lagging.await.unwrap();
    assert_eq!(
        seen.len(),
        3,
        "members were replaced although nothing asked for it"
    );
    let progressing = wait_for("the pool to report it is not progressing", T, || async {
        let status = pools(&client).get("p").await.unwrap().status?;
        let condition = status.conditions.into_iter().next()?;
        (condition.reason == "ProgressDeadlineExceeded").then_some(condition)
    })
    .await;
    assert_eq!(
        (progressing.type_.as_str(), progressing.status.as_str()),
        ("Progressing", "False"),
        "{progressing:?}"
    );
    assert!(
        progressing.message.contains("not Ready"),
        "{}",
        progressing.message
    );

    // A new image revision replaces the three (terminating ones still count).
    pools(&client)
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"imageRevision": "r2"}})),
        )
        .await
        .unwrap();
    // Sample until the three are replaced, then a while longer to catch a loop.
    let start = Instant::now();
    let mut replaced_at = None;
    while replaced_at.is_none_or(|at: Instant| at.elapsed() < Duration::from_secs(4)) {
        assert!(start.elapsed() < T * 2, "the members were never replaced");
        let items = list_vms(&client).await;
        if replaced_at.is_none()
            && items.len() == 3
            && items.iter().all(|vm| vm.spec.image_revision == "r2")
        {
            replaced_at = Some(Instant::now());
        }
        sample(items, &mut seen, &mut most);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(most <= 5, "{most} members at once with maxReplicas 5");
    assert_eq!(seen.len(), 6, "three replaced once, then no loop");
    let current = list_vms(&client).await;
    assert_eq!(current.len(), 3);
    assert!(current.iter().all(|vm| vm.spec.image_revision == "r2"));
    running.stop().await;
    emu.shutdown().await;
}

/// Case 3: three deletions that must each finish within one reconcile and leave no member
/// bound to a deleted claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletions_finish_in_one_reconcile() {
    let (emu, client) = start().await;
    let p = create_pool(&client, &pool("p", 0, 0, "r1")).await;
    let fresh = |name: &'static str| {
        let client = client.clone();
        async move { Arc::new(claims(&client).get(name).await.unwrap()) }
    };
    let pass = |name: &'static str| {
        let client = client.clone();
        async move {
            let ctx = frozen_context(&client).await;
            let claim = Arc::new(claims(&client).get(name).await.unwrap());
            reconcile_claim(claim, ctx).await.expect("reconcile");
        }
    };

    // (a) A Failed claim whose member is already gone.
    ready_member(&client, &p, "m1", "r1", 10).await;
    create_claim(&client, &claim("failed", "p", 600, "alice")).await;
    pass("failed").await;
    let bound = fresh("failed").await;
    let member = bound.status.clone().unwrap().virtual_machine_ref.unwrap();
    assert_eq!(member, "m1");
    vms(&client)
        .delete("m1", &DeleteParams::default())
        .await
        .unwrap();
    pass("failed").await;
    let failed = fresh("failed").await;
    assert_eq!(
        failed.status.clone().unwrap().phase.as_deref(),
        Some("Failed")
    );
    claims(&client)
        .delete("failed", &DeleteParams::default())
        .await
        .unwrap();
    pass("failed").await;
    assert!(
        claims(&client).get_opt("failed").await.unwrap().is_none(),
        "(a) one reconcile"
    );

    // (b) A Pending claim.
    create_claim(&client, &claim("pending", "p", 600, "alice")).await;
    pass("pending").await;
    assert_eq!(
        fresh("pending")
            .await
            .status
            .clone()
            .unwrap()
            .phase
            .as_deref(),
        Some("Pending")
    );
    claims(&client)
        .delete("pending", &DeleteParams::default())
        .await
        .unwrap();
    pass("pending").await;
    assert!(
        claims(&client).get_opt("pending").await.unwrap().is_none(),
        "(b) one reconcile"
    );

    // (c) Deleted at the moment it binds: the bind pass works from the copy read before the
    // deletion, so it still takes a member; the next pass sees the deletion.
    ready_member(&client, &p, "m3", "r1", 10).await;
    create_claim(&client, &claim("racing", "p", 600, "alice")).await;
    let before_delete = fresh("racing").await;
    claims(&client)
        .delete("racing", &DeleteParams::default())
        .await
        .unwrap();
    // The claim has no finalizer yet, so the delete removed it at once — exactly the window
    // in which the binding pass still runs on the old copy.
    let ctx = frozen_context(&client).await;
    reconcile_claim(before_delete, ctx)
        .await
        .expect("bind pass");
    assert!(
        members_of(&client, "racing").await.is_empty(),
        "(c) bound to a deleted claim"
    );

    // (c') The same race with the finalizer in place: one pass after the deletion releases.
    ready_member(&client, &p, "m4", "r1", 10).await;
    create_claim(&client, &claim("racing2", "p", 600, "alice")).await;
    let with_finalizer = claims(&client)
        .patch(
            "racing2",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": [CLAIM_FINALIZER]}})),
        )
        .await
        .unwrap();
    claims(&client)
        .delete("racing2", &DeleteParams::default())
        .await
        .unwrap();
    let ctx = frozen_context(&client).await;
    reconcile_claim(Arc::new(with_finalizer), ctx)
        .await
        .expect("bind pass");
    let taken = members_of(&client, "racing2").await;
    assert_eq!(taken.len(), 1, "the stale pass took one member");
    pass("racing2").await;
    assert!(
        claims(&client).get_opt("racing2").await.unwrap().is_none(),
        "(c) one reconcile"
    );
    assert!(
        vms(&client).get_opt(&taken[0]).await.unwrap().is_none(),
        "member destroyed"
    );
    assert!(
        list_vms(&client)
            .await
            .iter()
            .all(|vm| !vm.labels().contains_key(CLAIM_LABEL))
    );
    emu.shutdown().await;
}
