//! Optimistic concurrency: conditional updates from many tasks never lose an update, and of
//! two writers holding the same resourceVersion exactly one wins.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use kube_emulator::{Emulator, EmulatorConfig};
use serde_json::json;

async fn start() -> (Emulator, Client) {
    let emu = Emulator::start(EmulatorConfig::default())
        .await
        .expect("emulator starts");
    let kubeconfig = Kubeconfig::from_yaml(&emu.kubeconfig_yaml()).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config");
    let client = Client::try_from(config).expect("client");
    (emu, client)
}

fn counter(cm: &ConfigMap) -> u64 {
    cm.data
        .as_ref()
        .and_then(|d| d.get("n"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_conditional_updates_never_lose_an_update() {
    const TASKS: u64 = 8;
    const PER_TASK: u64 = 15;
    let (emu, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "counter"}, "data": {"n": "0"}}))
            .unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let cms = cms.clone();
        tasks.push(tokio::spawn(async move {
            let mut conflicts = 0u64;
            for _ in 0..PER_TASK {
                loop {
                    let mut cur = cms.get("counter").await.expect("get");
                    let next = counter(&cur) + 1;
                    cur.data
                        .get_or_insert_default()
                        .insert("n".into(), next.to_string());
                    match cms.replace("counter", &PostParams::default(), &cur).await {
                        Ok(_) => break,
                        Err(kube::Error::Api(s)) if s.code == 409 => conflicts += 1,
                        Err(e) => panic!("unexpected error {e}"),
                    }
                }
            }
            conflicts
        }));
    }
    let mut conflicts = 0;
    for t in tasks {
        conflicts += tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .expect("in time")
            .expect("task");
    }
    let last = cms.get("counter").await.unwrap();
    assert_eq!(
        counter(&last),
        TASKS * PER_TASK,
        "an update was lost ({conflicts} conflicts were retried)"
    );
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exactly_one_of_two_racing_writers_wins() {
    let (emu, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "race"}, "data": {"w": "none"}}))
            .unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    for round in 0..25 {
        let base = cms.get("race").await.unwrap();
        let rv = base.metadata.resource_version.clone().unwrap();
        let attempt = |who: &'static str, use_patch: bool| {
            let cms = cms.clone();
            let mut obj = base.clone();
            let rv = rv.clone();
            async move {
                if use_patch {
                    // A merge patch carrying the resourceVersion is a precondition too.
                    cms.patch("race", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"resourceVersion": rv}, "data": {"w": format!("{who}{round}")}})))
                        .await
                } else {
                    obj.data
                        .get_or_insert_default()
                        .insert("w".into(), format!("{who}{round}"));
                    cms.replace("race", &PostParams::default(), &obj).await
                }
            }
        };
        let use_patch = round % 2 == 1;
        let (a, b) = tokio::join!(attempt("a", use_patch), attempt("b", use_patch));
        let wins = [&a, &b].iter().filter(|r| r.is_ok()).count();
        assert_eq!(wins, 1, "round {round}: {a:?} / {b:?}");
        for r in [a, b] {
            if let Err(e) = r {
                match e {
                    kube::Error::Api(s) => {
                        assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"))
                    }
                    other => panic!("unexpected {other}"),
                }
            }
        }
    }
    emu.shutdown().await;
}
