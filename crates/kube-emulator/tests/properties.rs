//! Property tests of optimistic concurrency (issue 5): for any interleaving of tasks doing
//! read-modify-write with a `resourceVersion` precondition, no update is lost, a write
//! succeeds exactly when its precondition is the latest version, and a failed one is a
//! 409 `Conflict`. (Two racing writers holding the same version are the two-task case:
//! exactly one wins.)

use kube_emulator::api::{self, Ctx};
use kube_emulator::store::Store;
use kube_emulator::{UserInfo, resources::ResourceDef};
use proptest::prelude::*;
use serde_json::json;

fn setup() -> (Store, std::sync::Arc<ResourceDef>) {
    let mut store = Store::new(10_000);
    let admin = UserInfo::new("admin", &["system:masters"]);
    let mut ctx = Ctx::new(&admin);
    let ns = store
        .registry
        .get("", "v1", "namespaces")
        .expect("namespaces");
    api::create(
        &mut store,
        &ns,
        "",
        json!({"metadata": {"name": "default"}}),
        &mut ctx,
    )
    .expect("namespace");
    let cms = store
        .registry
        .get("", "v1", "configmaps")
        .expect("configmaps");
    api::create(
        &mut store,
        &cms,
        "default",
        json!({"metadata": {"name": "counter"}, "data": {"n": "0"}}),
        &mut ctx,
    )
    .expect("counter");
    (store, cms)
}

fn read(store: &Store) -> (String, u64) {
    let cm = store
        .get("", "configmaps", "default", "counter")
        .expect("counter exists");
    (
        cm["metadata"]["resourceVersion"]
            .as_str()
            .expect("rv")
            .to_string(),
        cm["data"]["n"]
            .as_str()
            .expect("n")
            .parse()
            .expect("number"),
    )
}

#[derive(Clone, Debug)]
enum Task {
    Idle,
    Read(String, u64),
}

proptest! {
    #[test]
    fn conditional_updates_never_lose_an_update(
        tasks in 2usize..6,
        per_task in 1u64..5,
        schedule in proptest::collection::vec(0usize..6, 0..200),
    ) {
        let (mut store, def) = setup();
        let admin = UserInfo::new("admin", &["system:masters"]);
        let mut state = vec![Task::Idle; tasks];
        let mut done = vec![0u64; tasks];
        // The random schedule first, then round-robin until every task is done.
        let mut picks = schedule.into_iter().map(|t| t % tasks).chain((0..).map(|i| i % tasks));
        let mut steps = 0;
        while done.iter().any(|d| *d < per_task) {
            steps += 1;
            prop_assert!(steps < 10_000, "no progress");
            let t = picks.next().expect("endless");
            if done[t] == per_task {
                continue;
            }
            match state[t].clone() {
                Task::Idle => {
                    let (rv, n) = read(&store);
                    state[t] = Task::Read(rv, n);
                }
                Task::Read(rv, n) => {
                    let latest = read(&store).0;
                    let mut ctx = Ctx::new(&admin);
                    let body = json!({"metadata": {"name": "counter", "resourceVersion": rv}, "data": {"n": (n + 1).to_string()}});
                    let result = api::update(&mut store, &def, "default", "counter", "", body, &mut ctx);
                    match result {
                        Ok(stored) => {
                            prop_assert_eq!(&rv, &latest, "a write with a stale version won");
                            prop_assert_ne!(stored["metadata"]["resourceVersion"].as_str(), Some(rv.as_str()));
                            done[t] += 1;
                        }
                        Err(e) => {
                            prop_assert_ne!(&rv, &latest, "a write with the latest version lost");
                            prop_assert_eq!((e.code, e.reason), (409, "Conflict"));
                        }
                    }
                    state[t] = Task::Idle;
                }
            }
        }
        let (_, n) = read(&store);
        prop_assert_eq!(n, tasks as u64 * per_task);
    }
}
