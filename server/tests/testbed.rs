//! The console and its controllers against the real kube-apiserver of the test bed
//! (`scripts/testbed`: kube-apiserver, kube-controller-manager and etcd from their Go
//! modules, the chart installed by helm). Everything the console does there it does as
//! the person through impersonation, from the chart's ServiceAccount, so the real RBAC
//! and the real CEL admission engine decide. Skipped (with a message) without
//! `BANLIEUE_TESTBED_DIR`; `make test` sets it.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use banlieue_testbed::{RELEASE_NAMESPACE, TestNamespace, Testbed, unique_name};
use cluster::Impersonation;
use cluster::crd::{VirtualMachine, VirtualMachineClaim, VirtualMachinePool};
use futures::StreamExt;
use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use kube::{Client, ResourceExt};
use support::{TestApp, form, get, post_form};

const PASSWORD: &str = "correct horse battery";
const T: Duration = Duration::from_secs(60);

/// A console on the test bed: the console's ServiceAccount credentials, controllers
/// watching a namespace of the test's own (their Lease in the release namespace, named
/// for the test), and a pool there with `warm` Ready members.
struct Console {
    app: TestApp,
    admin: Client,
    namespace: TestNamespace,
    pool: String,
}

impl Console {
    async fn start(bed: &Testbed, warm: u32) -> Self {
        let namespace = bed.namespace("console").await;
        banlieue_testbed::allow_leases_of_any_name(&bed.admin_client().await).await;
        let access = Impersonation::from_kubeconfig(Some(&bed.console_kubeconfig_path()))
            .await
            .unwrap();
        let mut controllers = cluster::ControllerConfig::new(RELEASE_NAMESPACE, "test");
        controllers.namespace = Some(namespace.name.clone());
        controllers.lease_name = unique_name("lease");
        controllers.pool_resync = Duration::from_millis(500);
        let app = TestApp::new()
            .await
            .with_cluster(Arc::new(access), controllers)
            .await;
        let admin = bed.admin_client().await;
        let pool = unique_name("pool");
        let object: VirtualMachinePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "banlieue.io/v1alpha1", "kind": "VirtualMachinePool",
            "metadata": {"name": pool},
            "spec": {"warmReplicas": warm, "maxReplicas": 10, "imageRevision": "r1",
                     "template": {"cpu": 1, "memory": "1Gi", "image": "sandbox:1"},
                     "providerRef": "simulated"},
        }))
        .unwrap();
        Api::<VirtualMachinePool>::namespaced(admin.clone(), &namespace.name)
            .create(&PostParams::default(), &object)
            .await
            .expect("the pool is created");
        Self {
            app,
            admin,
            namespace,
            pool,
        }
    }

    fn claims(&self) -> Api<VirtualMachineClaim> {
        Api::namespaced(self.admin.clone(), &self.namespace.name)
    }

    fn vms(&self) -> Api<VirtualMachine> {
        Api::namespaced(self.admin.clone(), &self.namespace.name)
    }

    /// Posts the dashboard's claim form for the pool, as the holder of `cookie`.
    async fn claim(&self, cookie: &str) -> support::TestResponse {
        let body = form(&[
            ("namespace", self.namespace.name.as_str()),
            ("pool", self.pool.as_str()),
            ("ttl_seconds", "900"),
        ]);
        self.app
            .send(post_form("/claims", body, Some(cookie)))
            .await
    }

    async fn ready_members(&self, n: usize) {
        for _ in 0..(T.as_millis() / 100) {
            let ready = self
                .vms()
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .iter()
                .filter(|vm| vm.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Ready"))
                .count();
            if ready >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the pool never had {n} Ready members");
    }

    async fn phase(&self, name: &str, phase: &str) -> VirtualMachineClaim {
        for _ in 0..(T.as_millis() / 100) {
            let claim = self.claims().get(name).await.unwrap();
            if claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some(phase) {
                return claim;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("claim {name} never reached {phase}");
    }
}

/// The tests of this file share one cluster, and each one's console keeps the cluster's
/// list of impersonable users equal to its own database's users: one console at a time.
static ONE_CONSOLE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn testbed() -> Option<Testbed> {
    Testbed::from_env("the console's real-cluster suite")
}

/// The resourceVersion (an etcd revision, comparable across kinds on a real API server)
/// at which `name` was deleted, from a watch started before.
async fn deleted_at<K>(api: Api<K>, name: String) -> u64
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let mut events = api
        .watch(
            &WatchParams::default().fields(&format!("metadata.name={name}")),
            "0",
        )
        .await
        .unwrap()
        .boxed();
    while let Some(event) = events.next().await {
        if let WatchEvent::Deleted(object) = event.unwrap() {
            return object.resource_version().unwrap().parse().unwrap();
        }
    }
    panic!("the watch on {name} ended before its deletion");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_developer_claims_through_the_console_and_releases_member_first() {
    let Some(bed) = testbed() else { return };
    let _one = ONE_CONSOLE_AT_A_TIME.lock().await;
    let console = Console::start(&bed, 2).await;
    let app = &console.app;
    app.create_user("alice", PASSWORD, &["developer"], false)
        .await;
    let cookie = app.sign_in("alice", PASSWORD).await;
    console.ready_members(2).await;

    let claimed = console.claim(&cookie).await;
    assert_eq!(claimed.status, StatusCode::SEE_OTHER, "{}", claimed.body);
    let name = claimed
        .location()
        .and_then(|to| to.strip_prefix("/?claimed="))
        .expect("back to the dashboard with the claim's name")
        .to_owned();
    let bound = console.phase(&name, "Bound").await;
    let status = bound.status.clone().unwrap();
    let member = status.virtual_machine_ref.clone().expect("a member");
    assert!(
        !status.addresses.is_empty(),
        "addresses mirrored: {status:?}"
    );
    assert_eq!(bound.spec.subject.id, "alice");

    let page = app
        .send(get(
            &format!("/claims/{}/{name}", console.namespace.name),
            Some(&cookie),
        ))
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(
        page.body.contains(">Bound<") && page.body.contains("data-testid=\"countdown\""),
        "{}",
        page.body
    );
    assert!(page.body.contains("ssh sandbox@"), "{}", page.body);

    // Release: the member is deleted and gone before the claim is.
    let member_gone = tokio::spawn(deleted_at(console.vms(), member.clone()));
    let claim_gone = tokio::spawn(deleted_at(console.claims(), name.clone()));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released = app
        .send(post_form(
            &format!("/claims/{}/{name}/release", console.namespace.name),
            "",
            Some(&cookie),
        ))
        .await;
    assert_eq!(released.status, StatusCode::SEE_OTHER, "{}", released.body);
    let (member_at, claim_at) = tokio::time::timeout(T, async {
        (member_gone.await.unwrap(), claim_gone.await.unwrap())
    })
    .await
    .expect("member and claim are deleted");
    assert!(
        member_at < claim_at,
        "the member was deleted at revision {member_at}, after its claim ({claim_at})"
    );
    let events = app.store().recent_audit(50).await.unwrap();
    for action in ["claim.create", "claim.release"] {
        assert!(
            events
                .iter()
                .any(|e| e.action == action && e.actor == "alice"),
            "{action} audited: {events:?}"
        );
    }
    console.namespace.delete().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_json_api_a_broker_claims_for_someone_else_and_no_one_else_may() {
    let Some(bed) = testbed() else { return };
    let _one = ONE_CONSOLE_AT_A_TIME.lock().await;
    let console = Console::start(&bed, 1).await;
    let app = &console.app;
    // `console:broker` is in the test bed's claimSubjectPolicy.brokers; alice is not.
    let mut tokens = BTreeMap::new();
    for name in ["broker", "alice"] {
        app.create_user(name, PASSWORD, &["developer"], false).await;
        let cookie = app.sign_in(name, PASSWORD).await;
        tokens.insert(name, app.id_token(&cookie, "banlieue-console").await);
    }
    let for_bob = serde_json::json!({
        "namespace": console.namespace.name, "pool": console.pool, "ttlSeconds": 900,
        "subject": {"issuer": "http://127.0.0.1:3000", "id": "bob"},
    });
    let post = |token: &str| {
        axum::http::Request::post("/api/v1/claims")
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .body(axum::body::Body::from(for_bob.to_string()))
            .unwrap()
    };
    let refused = app.send(post(&tokens["alice"])).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    let problem: serde_json::Value = serde_json::from_str(&refused.body).unwrap();
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("banlieue-claim-subject"),
        "the admission policy's refusal: {problem}"
    );
    let made = app.send(post(&tokens["broker"])).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    let claim: serde_json::Value = serde_json::from_str(&made.body).unwrap();
    let name = claim["metadata"]["name"].as_str().unwrap().to_owned();
    assert_eq!(
        console.claims().get(&name).await.unwrap().spec.subject.id,
        "bob"
    );
    let made_by: Vec<_> = console
        .claims()
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    assert_eq!(made_by, [name], "alice's refused claim was not made");
    console.namespace.delete().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewers_forged_claim_is_refused_with_the_api_servers_reason() {
    let Some(bed) = testbed() else { return };
    let _one = ONE_CONSOLE_AT_A_TIME.lock().await;
    let console = Console::start(&bed, 0).await;
    let app = &console.app;
    app.create_user("victor", PASSWORD, &["viewer"], false)
        .await;
    let cookie = app.sign_in("victor", PASSWORD).await;
    let dashboard = app.send(get("/", Some(&cookie))).await;
    assert!(
        dashboard
            .body
            .contains(&format!("data-pool=\"{}\"", console.pool)),
        "a viewer sees the pool"
    );
    let forged = console.claim(&cookie).await;
    let forged = app.refused_page(forged, "/", &cookie).await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN, "{}", forged.body);
    let alert = forged.alert().unwrap();
    assert!(alert.contains("Kubernetes refused"), "{alert}");
    // kube-apiserver's own RBAC denial, word for word.
    let reason = format!(
        "virtualmachineclaims.banlieue.io is forbidden: User \"console:victor\" cannot \
         create resource \"virtualmachineclaims\" in API group \"banlieue.io\" \
         in the namespace \"{}\"",
        console.namespace.name
    );
    assert!(alert.contains(&reason), "{alert}\n  wanted: {reason}");
    console.namespace.delete().await;
}

/// The "What can I do?" cells of `/account`: (resource, verb) → allowed.
fn access_matrix(html: &str) -> BTreeMap<(String, String), bool> {
    let mut cells = BTreeMap::new();
    for row in html.split("data-resource=\"").skip(1) {
        let resource = row.split('"').next().unwrap().to_owned();
        let row = row.split("</tr>").next().unwrap();
        for cell in row.split("data-verb=\"").skip(1) {
            let verb = cell.split('"').next().unwrap().to_owned();
            let allowed = cell
                .split_once("data-allowed=\"")
                .map(|(_, rest)| rest.starts_with("true"))
                .unwrap();
            cells.insert((resource.clone(), verb), allowed);
        }
    }
    cells
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_can_i_do_is_what_the_real_api_server_answers_for_each_role() {
    let Some(bed) = testbed() else { return };
    let _one = ONE_CONSOLE_AT_A_TIME.lock().await;
    let console = Console::start(&bed, 0).await;
    let app = &console.app;
    for role in ["viewer", "developer", "operator", "admin"] {
        let user = format!("{role}-user");
        app.create_user(&user, PASSWORD, &[role], false).await;
        let cookie = app.sign_in(&user, PASSWORD).await;
        let page = app.send(get("/account", Some(&cookie))).await;
        let shown = access_matrix(&page.body);
        assert_eq!(shown.len(), 21, "3 resources × 7 verbs: {shown:?}");
        let as_them = bed
            .impersonating(
                &format!("console:{user}"),
                &[&format!("console:{role}"), "system:authenticated"],
            )
            .await;
        let reviews: Api<SelfSubjectAccessReview> = Api::all(as_them);
        for ((resource, verb), allowed) in &shown {
            let review: SelfSubjectAccessReview = serde_json::from_value(serde_json::json!({
                "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": {
                    "group": "banlieue.io", "resource": resource, "verb": verb}},
            }))
            .unwrap();
            let answer = reviews
                .create(&PostParams::default(), &review)
                .await
                .unwrap()
                .status
                .unwrap()
                .allowed;
            assert_eq!(
                *allowed, answer,
                "{role}: the page says {verb} {resource} is {allowed}, kube-apiserver {answer}"
            );
        }
        let may_create_claims = shown[&("virtualmachineclaims".into(), "create".into())];
        assert_eq!(may_create_claims, role != "viewer", "{role}");
    }
    console.namespace.delete().await;
}
