//! kube-rs against the emulator: `Api` CRUD, `watcher` (with a 410 restart), and a
//! `Controller` reconcile loop. Every test starts its own emulator on loopback.
//!
//! With `BANLIEUE_KUBE_BACKEND=testbed` and `BANLIEUE_TESTBED_DIR` the same tests run on
//! the real kube-apiserver of the test bed, each in a namespace of its own, with its CRDs
//! in an API group of its own (see `common`): the claims are therefore handled as
//! `Object<ClaimSpec, ClaimStatus>` of the group the test was given.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::Server;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::{ApiResource, GroupVersionKind, Object};
use kube::runtime::controller::Action;
use kube::runtime::wait::{Error as WaitError, await_condition, conditions};
use kube::runtime::{Controller, watcher};
use kube::{Api, Client, CustomResource, CustomResourceExt, ResourceExt};
use kube_emulator::EmulatorConfig;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema, PartialEq)]
#[kube(
    group = "banlieue.io",
    version = "v1alpha1",
    kind = "VirtualMachineClaim",
    namespaced,
    status = "ClaimStatus",
    shortname = "vmc"
)]
#[serde(rename_all = "camelCase")]
pub struct ClaimSpec {
    pool_ref: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ttl_seconds: Option<i64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, JsonSchema, PartialEq, Default)]
pub struct ClaimStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    phase: Option<String>,
}

/// A claim of the test's API group (`VirtualMachineClaim` is its `banlieue.io` twin,
/// whose CRD the test installs in that group).
type Claim = Object<ClaimSpec, ClaimStatus>;

const DEADLINE: Duration = Duration::from_secs(30);

/// The server (`config` is for the emulator) and an admin client working in the test's
/// namespace.
async fn start(config: EmulatorConfig) -> (Server, Client) {
    let server = Server::start("kube-rs", config).await;
    let client = server.admin_client().await;
    (server, client)
}

/// Waits until the CRD `name` is served.
async fn established(client: &Client, name: &str) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let established = await_condition(crds, name, conditions::is_crd_established());
    tokio::time::timeout(DEADLINE, established)
        .await
        .expect("in time")
        .expect("established");
}

/// Installs the claims' CRD (`VirtualMachineClaim::crd()` in the test's group); their
/// `ApiResource`.
async fn install_crd(server: &Server, client: &Client) -> ApiResource {
    let group = server.group("banlieue.io");
    let mut crd = VirtualMachineClaim::crd();
    crd.metadata.name = Some(format!("virtualmachineclaims.{group}"));
    crd.spec.group = group.clone();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("CRD created");
    established(client, &crd.name_any()).await;
    let gvk = GroupVersionKind::gvk(&group, "v1alpha1", "VirtualMachineClaim");
    ApiResource::from_gvk_with_plural(&gvk, "virtualmachineclaims")
}

fn claim(ar: &ApiResource, name: &str, pool: &str) -> Claim {
    Claim::new(
        name,
        ar,
        ClaimSpec {
            pool_ref: pool.into(),
            ttl_seconds: Some(600),
        },
    )
}

fn api_error(e: kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_crud_on_configmaps_and_custom_resources() {
    let (server, client) = start(EmulatorConfig::default()).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let mut cm: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "a", "labels": {"tier": "front"}}, "data": {"k": "v"}}),
    )
    .unwrap();
    let created = cms
        .create(&PostParams::default(), &cm)
        .await
        .expect("create");
    assert!(created.metadata.uid.is_some() && created.metadata.creation_timestamp.is_some());
    let (code, reason) = api_error(cms.create(&PostParams::default(), &cm).await.unwrap_err());
    assert_eq!((code, reason.as_str()), (409, "AlreadyExists"));
    cm.metadata.name = Some("b".into());
    cm.metadata.labels = Some([("tier".to_string(), "back".to_string())].into());
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("create b");
    let front = cms
        .list(&ListParams::default().labels("tier in (front)"))
        .await
        .expect("list");
    assert_eq!(
        front.items.iter().map(|c| c.name_any()).collect::<Vec<_>>(),
        vec!["a"]
    );
    let not_front = cms
        .list(&ListParams::default().labels("tier notin (front),!missing"))
        .await
        .expect("list");
    assert_eq!(not_front.items.len(), 1);
    let by_name = cms
        .list(&ListParams::default().fields("metadata.name=b"))
        .await
        .expect("list");
    assert_eq!(by_name.items[0].name_any(), "b");
    let paged = cms
        .list(&ListParams::default().limit(1))
        .await
        .expect("page 1");
    assert_eq!(paged.items.len(), 1);
    let token = paged.metadata.continue_.clone().expect("continue token");
    let rest = cms
        .list(&ListParams::default().limit(1).continue_token(&token))
        .await
        .expect("page 2");
    assert_eq!(rest.items.len(), 1);
    assert_ne!(rest.items[0].name_any(), paged.items[0].name_any());

    let mut got = cms.get("a").await.expect("get");
    got.data
        .get_or_insert_default()
        .insert("k".into(), "v2".into());
    let replaced = cms
        .replace("a", &PostParams::default(), &got)
        .await
        .expect("replace");
    assert_ne!(
        replaced.metadata.resource_version,
        got.metadata.resource_version
    );
    let (code, reason) = api_error(
        cms.replace("a", &PostParams::default(), &got)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (code, reason.as_str()),
        (409, "Conflict"),
        "stale resourceVersion"
    );
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"m": "1"}})),
    )
    .await
    .expect("merge");
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::<()>::Json(
            serde_json::from_value(json!([{"op": "add", "path": "/data/j", "value": "2"}]))
                .unwrap(),
        ),
    )
    .await
    .expect("json patch");
    let applied = cms
        .patch("c", &PatchParams::apply("test").force(), &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "y"}})))
        .await
        .expect("server-side apply creates");
    assert_eq!(applied.data.unwrap()["x"], "y");
    let a = cms.get("a").await.unwrap();
    assert_eq!(
        a.data.unwrap(),
        [("k", "v2"), ("m", "1"), ("j", "2")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    );
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::default_namespaced(client.clone());
    let bad = http::Request::post(format!(
        "/api/v1/namespaces/{}/secrets",
        server.namespace()
    ))
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bad"}, "data": {"k": "%%%"}})).unwrap())
        .unwrap();
    let (code, _) = api_error(client.request::<serde_json::Value>(bad).await.unwrap_err());
    assert_eq!(code, 400, "secret data must be base64");
    let good: k8s_openapi::api::core::v1::Secret =
        serde_json::from_value(json!({"metadata": {"name": "good"}, "stringData": {"k": "v"}}))
            .unwrap();
    let good = secrets.create(&PostParams::default(), &good).await.unwrap();
    assert_eq!(
        good.data.unwrap()["k"].0,
        b"v".to_vec(),
        "stringData is folded into data"
    );
    let deleted = cms
        .delete("a", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(
        deleted.is_right(),
        "a removed ConfigMap is answered with a Success Status"
    );
    let (code, reason) = api_error(cms.get("a").await.unwrap_err());
    assert_eq!((code, reason.as_str()), (404, "NotFound"));

    let ar = install_crd(&server, &client).await;
    let claims: Api<Claim> = Api::default_namespaced_with(client.clone(), &ar);
    let mut c = claim(&ar, "c1", "pool");
    c.status = Some(ClaimStatus {
        phase: Some("Ignored".into()),
    });
    let created = claims
        .create(&PostParams::default(), &c)
        .await
        .expect("create claim");
    assert_eq!(
        created.status, None,
        "status is dropped on create when the subresource is on"
    );
    assert_eq!(created.metadata.generation, Some(1));
    let with_status = claims
        .patch_status(
            "c1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Bound"}, "spec": {"poolRef": "ignored"}})),
        )
        .await
        .expect("status patch");
    assert_eq!(
        with_status.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Bound")
    );
    assert_eq!(
        with_status.spec.pool_ref, "pool",
        "status writes ignore spec"
    );
    assert_eq!(with_status.metadata.generation, Some(1));
    let spec_change = claims
        .patch(
            "c1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"poolRef": "p2"}, "status": {"phase": "X"}})),
        )
        .await
        .unwrap();
    assert_eq!(spec_change.metadata.generation, Some(2));
    assert_eq!(
        spec_change.status.and_then(|s| s.phase).as_deref(),
        Some("Bound"),
        "main writes ignore status"
    );
    let (code, _) = api_error(
        claims
            .create(&PostParams::default(), &claim(&ar, "UPPER", "p"))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 422);
    let dry = claims
        .create(
            &PostParams {
                dry_run: true,
                ..PostParams::default()
            },
            &claim(&ar, "dry", "p"),
        )
        .await
        .expect("dry run");
    assert_eq!(dry.name_any(), "dry");
    assert_eq!(api_error(claims.get("dry").await.unwrap_err()).0, 404);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_streams_changes_bookmarks_and_410() {
    let config = EmulatorConfig {
        watch_history: 20,
        bookmark_interval: Duration::from_millis(200),
        ..EmulatorConfig::default()
    };
    let (server, client) = start(config).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let mut events = watcher(cms.clone(), watcher::Config::default().labels("app=w")).boxed();
    let init = tokio::time::timeout(DEADLINE, async {
        loop {
            if let Some(Ok(watcher::Event::InitDone)) = events.next().await {
                return;
            }
        }
    });
    init.await.expect("initial list in time");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "w1", "labels": {"app": "w"}}}))
            .unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let other: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "other"}})).unwrap();
    cms.create(&PostParams::default(), &other).await.unwrap();
    cms.patch(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"a": "1"}})),
    )
    .await
    .unwrap();
    cms.delete("w1", &DeleteParams::default()).await.unwrap();
    let mut seen = Vec::new();
    tokio::time::timeout(DEADLINE, async {
        while seen.len() < 3 {
            match events
                .try_next()
                .await
                .expect("watch ok")
                .expect("stream open")
            {
                watcher::Event::Apply(o) => seen.push(format!(
                    "apply {} {}",
                    o.name_any(),
                    o.data.map(|d| d.len()).unwrap_or(0)
                )),
                watcher::Event::Delete(o) => seen.push(format!("delete {}", o.name_any())),
                _ => {}
            }
        }
    })
    .await
    .expect("events in time");
    assert_eq!(seen, vec!["apply w1 0", "apply w1 1", "delete w1"]);

    // Bookmarks arrive when allowed (the real server sends one 2 s before the watch's
    // timeout, the emulator every `bookmark_interval`).
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut raw = cms
        .watch(&WatchParams::default().timeout(10), &rv)
        .await
        .expect("watch")
        .boxed();
    let got_bookmark = tokio::time::timeout(Duration::from_secs(12), async {
        while let Some(Ok(ev)) = raw.next().await {
            if let WatchEvent::Bookmark(_) = ev {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    assert!(got_bookmark, "no bookmark");

    // A resourceVersion older than the kept history gets 410 Expired. Emulator-only: it
    // needs the `watch_history` knob (the real server's watch cache keeps at least 75 s,
    // and etcd every revision it has not compacted).
    if !server.skip_on_testbed("410 Expired for a resourceVersion older than watch_history") {
        for i in 0..30 {
            let cm: ConfigMap =
                serde_json::from_value(json!({"metadata": {"name": format!("n{i}")}})).unwrap();
            cms.create(&PostParams::default(), &cm).await.unwrap();
        }
        let mut old = cms
            .watch(&WatchParams::default().timeout(5), "2")
            .await
            .expect("watch")
            .boxed();
        match tokio::time::timeout(DEADLINE, old.next())
            .await
            .expect("in time")
        {
            Some(Ok(WatchEvent::Error(e))) => {
                assert_eq!((e.code, e.reason.as_str()), (410, "Expired"))
            }
            other => panic!("expected a 410 error event, got {other:?}"),
        }
    }
    // The watcher keeps working across that (it relists on 410).
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "w2", "labels": {"app": "w"}}}))
            .unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let found = tokio::time::timeout(DEADLINE, async {
        while let Some(Ok(ev)) = events.next().await {
            if let watcher::Event::Apply(o) | watcher::Event::InitApply(o) = ev
                && o.name_any() == "w2"
            {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    assert!(found);
    server.shutdown().await;
}

struct Ctx {
    client: Client,
    ar: ApiResource,
}

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct ReconcileError(#[from] kube::Error);

async fn reconcile(obj: Arc<Claim>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let api: Api<Claim> = Api::namespaced_with(
        ctx.client.clone(),
        &obj.namespace().unwrap_or_default(),
        &ctx.ar,
    );
    if obj.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Bound") {
        api.patch_status(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Bound"}})),
        )
        .await?;
    }
    Ok(Action::requeue(Duration::from_secs(60)))
}

fn error_policy(_: Arc<Claim>, _: &ReconcileError, _: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_millis(200))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_reconciles_claims() {
    let (server, client) = start(EmulatorConfig::default()).await;
    let ar = install_crd(&server, &client).await;
    let claims: Api<Claim> = Api::all_with(client.clone(), &ar);
    let controller = Controller::new_with(claims, watcher::Config::default(), ar.clone())
        .run(
            reconcile,
            error_policy,
            Arc::new(Ctx {
                client: client.clone(),
                ar: ar.clone(),
            }),
        )
        .for_each(|_| async {});
    let handle = tokio::spawn(controller);
    let ns: Api<Claim> = Api::default_namespaced_with(client.clone(), &ar);
    ns.create(&PostParams::default(), &claim(&ar, "c1", "pool"))
        .await
        .unwrap();
    let bound = await_condition(ns.clone(), "c1", |o: Option<&Claim>| {
        o.and_then(|c| c.status.as_ref())
            .and_then(|s| s.phase.as_deref())
            == Some("Bound")
    });
    let r: Result<_, WaitError> = tokio::time::timeout(DEADLINE, bound)
        .await
        .expect("reconciled in time");
    r.expect("condition");
    handle.abort();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_with_selector_sees_objects_enter_and_leave() {
    let (server, client) = start(EmulatorConfig::default()).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = cms
        .watch(&WatchParams::default().labels("app=sel").timeout(20), &rv)
        .await
        .expect("watch")
        .boxed();
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "s1"}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    cms.patch(
        "s1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "sel"}}})),
    )
    .await
    .unwrap();
    cms.patch(
        "s1",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"a": "1"}})),
    )
    .await
    .unwrap();
    cms.patch(
        "s1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "other"}}})),
    )
    .await
    .unwrap();
    let mut kinds = Vec::new();
    tokio::time::timeout(DEADLINE, async {
        while kinds.len() < 3 {
            match stream.next().await.expect("open").expect("event") {
                WatchEvent::Added(_) => kinds.push("ADDED"),
                WatchEvent::Modified(_) => kinds.push("MODIFIED"),
                WatchEvent::Deleted(_) => kinds.push("DELETED"),
                _ => {}
            }
        }
    })
    .await
    .expect("events in time");
    assert_eq!(kinds, vec!["ADDED", "MODIFIED", "DELETED"]);
    server.shutdown().await;
}

/// More watches than the fan-out wakes at once: each sees every change of its type, in
/// order, and none of another type's; every watch ends when the server stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_watches_see_every_change_in_order_and_end_at_shutdown() {
    const CHANGES: usize = 5;
    let (server, client) = start(EmulatorConfig::default()).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let secrets: Api<Secret> = Api::default_namespaced(client.clone());
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut watches = Vec::new();
    for _ in 0..3 * kube_emulator::feed::WAKE_SLICE + 1 {
        let w = cms
            .watch(&WatchParams::default().timeout(60), &rv)
            .await
            .expect("watch");
        watches.push(w.boxed());
    }
    let mut secret_watch = secrets
        .watch(&WatchParams::default().timeout(60), &rv)
        .await
        .expect("watch")
        .boxed();
    for i in 0..CHANGES {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("fan-{i}")}})).unwrap();
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let want: Vec<String> = (0..CHANGES).map(|i| format!("ADDED fan-{i}")).collect();
    for w in &mut watches {
        let mut seen = Vec::new();
        tokio::time::timeout(DEADLINE, async {
            while seen.len() < CHANGES {
                match w.next().await.expect("open").expect("event") {
                    WatchEvent::Added(o) => seen.push(format!("ADDED {}", o.name_any())),
                    other => seen.push(format!("{other:?}")),
                }
            }
        })
        .await
        .expect("events in time");
        assert_eq!(seen, want);
    }
    if server.is_real() {
        // The watches' end at shutdown is the emulator's own; on the test bed the Secret
        // watch only has to stay quiet.
        eprintln!("skipped on the real kube-apiserver: watches ending at the emulator's shutdown");
        let quiet = tokio::time::timeout(Duration::from_secs(2), secret_watch.next()).await;
        assert!(
            quiet.is_err(),
            "a Secret watch sees no ConfigMap change: {quiet:?}"
        );
        server.shutdown().await;
        return;
    }
    let stopped = std::time::Instant::now();
    server.shutdown().await;
    assert!(
        stopped.elapsed() < Duration::from_secs(4),
        "open watches held the shutdown for {:?}",
        stopped.elapsed()
    );
    for w in &mut watches {
        let end = tokio::time::timeout(DEADLINE, w.next()).await;
        assert!(matches!(end, Ok(None) | Ok(Some(Err(_)))), "the watch ends");
    }
    let secret_events = tokio::time::timeout(DEADLINE, async {
        let mut n = 0;
        while let Some(Ok(_)) = secret_watch.next().await {
            n += 1;
        }
        n
    })
    .await
    .expect("the secret watch ends");
    assert_eq!(secret_events, 0, "a Secret watch sees no ConfigMap change");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_with_streaming_lists() {
    let (server, client) = start(EmulatorConfig::default()).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "pre"}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let mut events = watcher(cms.clone(), watcher::Config::default().streaming_lists()).boxed();
    let mut initial = Vec::new();
    tokio::time::timeout(DEADLINE, async {
        loop {
            match events.try_next().await.expect("ok").expect("open") {
                watcher::Event::InitApply(o) => initial.push(o.name_any()),
                watcher::Event::InitDone => break,
                _ => {}
            }
        }
    })
    .await
    .expect("initial events end in time");
    assert_eq!(initial, vec!["pre"]);
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "post"}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let next = tokio::time::timeout(DEADLINE, events.try_next())
        .await
        .expect("in time")
        .expect("ok")
        .expect("open");
    assert!(
        matches!(next, watcher::Event::Apply(ref o) if o.name_any() == "post"),
        "{next:?}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_tracks_managers_conflicts_and_removals() {
    let (server, client) = start(EmulatorConfig::default()).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let apply = |manager: &'static str, force: bool, data: serde_json::Value| {
        let cms = cms.clone();
        async move {
            let mut pp = PatchParams::apply(manager);
            pp.force = force;
            cms.patch(
                "ssa",
                &pp,
                &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": data})),
            )
            .await
        }
    };
    let data = |cm: ConfigMap| cm.data.unwrap_or_default().into_iter().collect::<Vec<_>>();
    let first = apply("alpha", false, json!({"a": "1", "b": "2"}))
        .await
        .expect("create by apply");
    assert_eq!(
        data(first.clone()),
        vec![("a".into(), "1".into()), ("b".into(), "2".into())]
    );
    assert!(
        first
            .metadata
            .managed_fields
            .unwrap_or_default()
            .iter()
            .any(|m| m.manager.as_deref() == Some("alpha"))
    );
    let second = apply("alpha", false, json!({"a": "1"}))
        .await
        .expect("re-apply");
    assert_eq!(
        data(second),
        vec![("a".into(), "1".into())],
        "a field no longer applied is removed"
    );
    let (code, reason) = api_error(apply("beta", false, json!({"a": "9"})).await.unwrap_err());
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    apply("beta", false, json!({"a": "1", "c": "3"}))
        .await
        .expect("same value is shared, not a conflict");
    let forced = apply("beta", true, json!({"a": "9", "c": "3"}))
        .await
        .expect("force takes the field");
    assert_eq!(
        data(forced),
        vec![("a".into(), "9".into()), ("c".into(), "3".into())]
    );
    let (code, _) = api_error(apply("alpha", false, json!({"a": "1"})).await.unwrap_err());
    assert_eq!(code, 409, "alpha lost data.a to beta");
    // Plain patches keep the ownership records.
    cms.patch(
        "ssa",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"d": "4"}})),
    )
    .await
    .unwrap();
    let after = cms.get("ssa").await.unwrap();
    let managers: Vec<String> = after
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(managers.contains(&"beta".to_string()), "{managers:?}");
    // A plain patch that removes beta's fields frees them: another manager may apply them
    // (what a Lease release followed by a new holder's apply does).
    cms.patch(
        "ssa",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"a": null, "c": null}})),
    )
    .await
    .unwrap();
    apply("gamma", false, json!({"a": "5", "c": "6"}))
        .await
        .expect("removed fields have no owner left to conflict with");
    server.shutdown().await;
}

/// Leader election as kube-rs based electors do it on `coordination.k8s.io/v1` Leases:
/// get (404), create (one winner, the other gets 409 AlreadyExists), renew with the
/// resourceVersion read (a stale one gets 409 Conflict), take over an expired lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_support_leader_election() {
    use k8s_openapi::api::coordination::v1::Lease;
    let (server, client) = start(EmulatorConfig::default()).await;
    let leases: Api<Lease> = Api::default_namespaced(client.clone());
    // Every write renews (a write that changes nothing keeps the resourceVersion, as on
    // the real server).
    let renewals = std::sync::atomic::AtomicU32::new(0);
    let lease = |holder: &str, rv: Option<&str>, transitions: i32| -> Lease {
        let n = renewals.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut l = json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "leader"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                "acquireTime": "2026-01-01T00:00:00.000000Z",
                "renewTime": format!("2026-01-01T00:00:{n:02}.123456Z"),
                "leaseTransitions": transitions}
        });
        if let Some(rv) = rv {
            l["metadata"]["resourceVersion"] = json!(rv);
        }
        serde_json::from_value(l).expect("lease")
    };
    let (code, _) = api_error(leases.get("leader").await.unwrap_err());
    assert_eq!(code, 404);
    let a = leases
        .create(&PostParams::default(), &lease("a", None, 0))
        .await
        .expect("a acquires");
    let (code, reason) = api_error(
        leases
            .create(&PostParams::default(), &lease("b", None, 0))
            .await
            .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (409, "AlreadyExists"));
    let stale_rv = a.resource_version().expect("rv");
    let renewed = leases
        .replace(
            "leader",
            &PostParams::default(),
            &lease("a", Some(&stale_rv), 0),
        )
        .await
        .expect("a renews with the resourceVersion it read");
    let (code, reason) = api_error(
        leases
            .replace(
                "leader",
                &PostParams::default(),
                &lease("b", Some(&stale_rv), 1),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (code, reason.as_str()),
        (409, "Conflict"),
        "b read an old version"
    );
    let current = leases.get("leader").await.expect("get");
    assert_eq!(current.resource_version(), renewed.resource_version());
    let spec = current.spec.clone().expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("a"));
    assert_eq!(spec.lease_duration_seconds, Some(15));
    assert!(spec.renew_time.is_some(), "MicroTime round-trips");
    let taken = leases
        .replace(
            "leader",
            &PostParams::default(),
            &lease("b", current.resource_version().as_deref(), 1),
        )
        .await
        .expect("b takes over with the current resourceVersion");
    let spec = taken.spec.expect("spec");
    assert_eq!(
        (spec.holder_identity.as_deref(), spec.lease_transitions),
        (Some("b"), Some(1))
    );
    // An apply carrying a resourceVersion is conditional too.
    let (code, _) = api_error(
        leases
            .patch(
                "leader",
                &PatchParams::apply("elector").force(),
                &Patch::Apply(json!({
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": "leader", "resourceVersion": stale_rv},
                    "spec": {"holderIdentity": "c"}
                })),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 409);
    server.shutdown().await;
}

/// A controller applies its status conditions by `type` and its finalizer into the
/// `metadata.finalizers` set, without disturbing another manager's entries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_apply_merges_conditions_by_type() {
    let (server, client) = start(EmulatorConfig::default()).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let group = server.group("example.io");
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gadgets.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "properties": {"conditions": {
                        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                        "items": {"type": "object", "required": ["type", "status"], "properties": {
                            "type": {"type": "string"}, "status": {"type": "string"}, "reason": {"type": "string"}}}}}}}}}}]}
    }))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    established(&client, &crd.name_any()).await;
    let gvk = GroupVersionKind::gvk(&group, "v1", "Gadget");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "gadgets");
    let gadgets: Api<kube::core::DynamicObject> = Api::default_namespaced_with(client.clone(), &ar);
    let apply = |manager: &'static str, subresource: bool, body: serde_json::Value| {
        let gadgets = gadgets.clone();
        let api_version = ar.api_version.clone();
        async move {
            let mut obj =
                json!({"apiVersion": api_version, "kind": "Gadget", "metadata": {"name": "g"}});
            json_patch::merge(&mut obj, &body);
            let pp = PatchParams::apply(manager);
            if subresource {
                gadgets.patch_status("g", &pp, &Patch::Apply(obj)).await
            } else {
                gadgets.patch("g", &pp, &Patch::Apply(obj)).await
            }
        }
    };
    apply(
        "user",
        false,
        json!({"metadata": {"finalizers": ["example.io/user"]}, "spec": {"x": 1}}),
    )
    .await
    .expect("created by apply");
    apply(
        "controller",
        false,
        json!({"metadata": {"finalizers": ["example.io/controller"]}}),
    )
    .await
    .expect("controller adds its finalizer");
    apply(
        "controller",
        true,
        json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
    )
    .await
    .expect("controller status");
    apply(
        "prober",
        true,
        json!({"status": {"conditions": [{"type": "Reachable", "status": "True"}]}}),
    )
    .await
    .expect("prober status");
    let g = apply(
        "controller",
        true,
        json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
    )
    .await
    .expect("controller flips its condition");
    assert_eq!(
        g.data["status"]["conditions"],
        json!([{"type": "Ready", "status": "True"}, {"type": "Reachable", "status": "True"}])
    );
    assert_eq!(
        g.metadata.finalizers,
        Some(vec![
            "example.io/user".to_string(),
            "example.io/controller".to_string()
        ])
    );
    assert_eq!(
        g.data["spec"],
        json!({"x": 1}),
        "the status apply leaves spec alone"
    );
    let err = apply(
        "prober",
        true,
        json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}),
    )
    .await
    .unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert!(
                s.message.contains(r#"conflict with "controller" with subresource "status": .status.conditions[type="Ready"].status"#),
                "{}",
                s.message
            );
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    server.shutdown().await;
}
