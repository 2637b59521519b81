//! Helpers shared by the integration tests (included with `mod common;`): the API server
//! with the chart's CRDs, kube-rs clients, object builders, polling, and running
//! controllers.
//!
//! One harness, two backends: by default each test starts its own Kubernetes emulator;
//! with `BANLIEUE_KUBE_BACKEND=testbed` the same tests run against the real
//! kube-apiserver of the test bed (`scripts/testbed`, `BANLIEUE_TESTBED_DIR`), each in a
//! namespace of its own, with the chart installed by helm. A client's default namespace is
//! the test's namespace: the helpers work there.
#![allow(dead_code)]

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use banlieue_testbed::{TestNamespace, Testbed};
use cluster::crd::{
    ClaimSubject, POOL_LABEL, VirtualMachine, VirtualMachineClaim, VirtualMachineClaimSpec,
    VirtualMachinePool, VirtualMachinePoolSpec, VirtualMachineProvider, VirtualMachineSpec,
    VirtualMachineTemplate,
};
use cluster::{ControllerConfig, Metrics, SimulatedProviderConfig};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Resource, ResourceExt};
use kube_emulator::{Emulator, EmulatorConfig};
use serde_json::json;

pub const ISSUER: &str = "https://console.example.com";

/// The API server a test runs against.
pub enum Server {
    /// A fresh emulator of the test's own.
    Emulator(Emulator),
    /// The shared real kube-apiserver, and the test's namespace in it.
    Testbed(Testbed, TestNamespace),
}

impl Server {
    /// `true` on the real kube-apiserver.
    pub fn is_real(&self) -> bool {
        matches!(self, Self::Testbed(..))
    }

    /// The test's namespace.
    pub fn namespace(&self) -> &str {
        match self {
            Self::Emulator(_) => "default",
            Self::Testbed(_, ns) => &ns.name,
        }
    }

    /// An admin kubeconfig whose default namespace is the test's.
    fn admin_kubeconfig(&self) -> Kubeconfig {
        let yaml = match self {
            Self::Emulator(emu) => emu.kubeconfig_for(emu.admin_token()),
            Self::Testbed(bed, _) => bed.admin_kubeconfig(),
        };
        let mut kubeconfig = Kubeconfig::from_yaml(&yaml).expect("kubeconfig");
        for context in &mut kubeconfig.contexts {
            if let Some(context) = context.context.as_mut() {
                context.namespace = Some(self.namespace().to_owned());
            }
        }
        kubeconfig
    }

    /// Stops the emulator, or deletes the test's namespace on the test bed.
    pub async fn shutdown(self) {
        match self {
            Self::Emulator(emu) => emu.shutdown().await,
            Self::Testbed(_, ns) => ns.delete().await,
        }
    }
}

/// `BANLIEUE_KUBE_BACKEND=testbed` runs the suites on the test bed.
pub fn on_testbed() -> bool {
    std::env::var("BANLIEUE_KUBE_BACKEND").as_deref() == Ok("testbed")
}

/// The chart directory.
pub fn chart_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../charts/banlieue-console")
}

/// The API server with the chart's CRDs installed, and an admin client.
pub async fn start() -> (Server, Client) {
    let server = if on_testbed() {
        let bed = Testbed::from_env("BANLIEUE_KUBE_BACKEND=testbed")
            .expect("BANLIEUE_KUBE_BACKEND=testbed needs BANLIEUE_TESTBED_DIR");
        let ns = bed.namespace("cluster").await;
        Server::Testbed(bed, ns)
    } else {
        Server::Emulator(
            Emulator::start(EmulatorConfig::default())
                .await
                .expect("emulator starts"),
        )
    };
    let client = admin_client(&server).await;
    if !server.is_real() {
        install_crds(&client).await;
    }
    (server, client)
}

/// An admin client working in the test's namespace.
pub async fn admin_client(server: &Server) -> Client {
    let config =
        kube::Config::from_custom_kubeconfig(server.admin_kubeconfig(), &Default::default())
            .await
            .expect("config");
    Client::try_from(config).expect("client")
}

/// Applies `charts/banlieue-console/crds/*.yaml`.
pub async fn install_crds(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let dir = chart_dir().join("crds");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("crds dir")
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for path in files {
        let crd: CustomResourceDefinition =
            serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).expect("CRD parses");
        crds.create(&PostParams::default(), &crd)
            .await
            .unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
    }
}

/// The console's ServiceAccount, as the chart binds it.
pub const CONSOLE_SERVICE_ACCOUNT: &str = "system:serviceaccount:banlieue-system:banlieue-console";

/// The console's own credentials (its ServiceAccount's token: on the emulator a static
/// token made here, on the test bed the one `scripts/testbed` made), working in the
/// test's namespace: what the chart's RBAC grants the console, and no more.
pub async fn console_config(server: &Server) -> kube::Config {
    let yaml = match server {
        Server::Emulator(emu) => {
            let token = format!("console-{}", banlieue_testbed::unique_name("token"));
            emu.add_token(
                &token,
                kube_emulator::UserInfo {
                    username: CONSOLE_SERVICE_ACCOUNT.into(),
                    groups: vec![
                        "system:serviceaccounts".into(),
                        "system:serviceaccounts:banlieue-system".into(),
                    ],
                    ..kube_emulator::UserInfo::default()
                },
            );
            emu.kubeconfig_for(&token)
        }
        Server::Testbed(bed, _) => std::fs::read_to_string(bed.console_kubeconfig_path())
            .expect("the test bed's console.kubeconfig"),
    };
    let mut kubeconfig = Kubeconfig::from_yaml(&yaml).expect("kubeconfig");
    for context in &mut kubeconfig.contexts {
        if let Some(context) = context.context.as_mut() {
            context.namespace = Some(server.namespace().to_owned());
        }
    }
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config")
}

/// The admin client impersonating `user` with `groups` (like the console does).
pub async fn impersonating(server: &Server, user: &str, groups: &[&str]) -> Client {
    let mut config = kube::Config::from_custom_kubeconfig(
        server.admin_kubeconfig(),
        &KubeConfigOptions::default(),
    )
    .await
    .expect("config");
    config.auth_info.impersonate = Some(user.into());
    config.auth_info.impersonate_groups = Some(groups.iter().map(|g| g.to_string()).collect());
    Client::try_from(config).expect("client")
}

pub fn template() -> VirtualMachineTemplate {
    VirtualMachineTemplate {
        cpu: 2,
        memory: "4Gi".into(),
        image: "registry.example/sandbox:1".into(),
    }
}

pub fn pool(name: &str, warm: u32, max: u32, revision: &str) -> VirtualMachinePool {
    VirtualMachinePool::new(
        name,
        VirtualMachinePoolSpec {
            warm_replicas: warm,
            max_replicas: max,
            image_revision: revision.into(),
            template: template(),
            provider_ref: "simulated".into(),
            progress_deadline_seconds: None,
        },
    )
}

pub fn claim(name: &str, pool: &str, ttl_seconds: u32, subject: &str) -> VirtualMachineClaim {
    VirtualMachineClaim::new(
        name,
        VirtualMachineClaimSpec {
            pool_ref: pool.into(),
            ttl_seconds,
            subject: ClaimSubject {
                issuer: ISSUER.into(),
                id: subject.into(),
            },
        },
    )
}

pub fn pools(client: &Client) -> Api<VirtualMachinePool> {
    Api::default_namespaced(client.clone())
}
pub fn vms(client: &Client) -> Api<VirtualMachine> {
    Api::default_namespaced(client.clone())
}
pub fn claims(client: &Client) -> Api<VirtualMachineClaim> {
    Api::default_namespaced(client.clone())
}
pub fn providers(client: &Client) -> Api<VirtualMachineProvider> {
    Api::all(client.clone())
}

pub async fn create_pool(client: &Client, pool: &VirtualMachinePool) -> VirtualMachinePool {
    pools(client)
        .create(&PostParams::default(), pool)
        .await
        .expect("pool created")
}

pub async fn create_claim(client: &Client, claim: &VirtualMachineClaim) -> VirtualMachineClaim {
    claims(client)
        .create(&PostParams::default(), claim)
        .await
        .expect("claim created")
}

/// Creates a member of `pool` the way the pool controller would, made Ready at once (no
/// provider), with `ready_since_secs_ago` and `revision` in its status.
pub async fn ready_member(
    client: &Client,
    pool: &VirtualMachinePool,
    name: &str,
    revision: &str,
    ready_since_secs_ago: i64,
) -> VirtualMachine {
    let owner = OwnerReference {
        api_version: "banlieue.io/v1alpha1".into(),
        kind: "VirtualMachinePool".into(),
        name: pool.name_any(),
        uid: pool.uid().expect("pool uid"),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let vm = VirtualMachine {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([(POOL_LABEL.to_owned(), pool.name_any())].into()),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: VirtualMachineSpec {
            template: template(),
            image_revision: revision.into(),
            provider_ref: "external".into(),
        },
        status: None,
    };
    let api = vms(client);
    api.create(&PostParams::default(), &vm).await.expect("vm");
    let since = k8s_openapi::jiff::Timestamp::now()
        - k8s_openapi::jiff::SignedDuration::from_secs(ready_since_secs_ago);
    let since = since.round(k8s_openapi::jiff::Unit::Second).unwrap();
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "phase": "Ready", "readySince": since.to_string(), "imageRevision": revision,
            "addresses": [{"type": "InternalIP", "address": format!("10.9.0.{}", name.len())}],
        }})),
    )
    .await
    .expect("vm status")
}

/// Polls `check` every 50 ms until it returns `Some`, or panics after `timeout`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the claim has `phase`, returns it.
pub async fn wait_phase(
    client: &Client,
    name: &str,
    phase: &str,
    timeout: Duration,
) -> VirtualMachineClaim {
    let api = claims(client);
    wait_for(&format!("claim {name} {phase}"), timeout, || {
        let api = api.clone();
        async move {
            let c = api.get_opt(name).await.ok()??;
            (c.status.as_ref()?.phase.as_deref() == Some(phase)).then_some(c)
        }
    })
    .await
}

/// Waits until the object is gone.
pub async fn wait_gone<K>(api: &Api<K>, name: &str, timeout: Duration)
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    wait_for(&format!("{name} gone"), timeout, || async {
        matches!(api.get_opt(name).await, Ok(None)).then_some(())
    })
    .await
}

pub async fn list_vms(client: &Client) -> Vec<VirtualMachine> {
    vms(client)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

/// Controllers running in the background (with leader election), until [`Running::stop`].
pub struct Running {
    pub metrics: Arc<Metrics>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), cluster::Error>>,
}

impl Running {
    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.await.expect("join").expect("controllers ran");
    }
}

/// `metrics` in the text format `/metrics` serves.
pub fn exposition(metrics: &Metrics) -> String {
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    text
}

/// Test timings: fast pool resync, provider Ready and destroyed "after 300 ms" — counted
/// from second-precision Kubernetes timestamps, so anything up to about 1.3 s. The lease
/// leaves the leader several seconds of slack before a follower may take over.
pub fn test_config(client: &Client, identity: &str) -> ControllerConfig {
    let ns = client.default_namespace();
    let mut config = ControllerConfig::new(ns, identity);
    config.namespace = Some(ns.into());
    config.pool_resync = Duration::from_millis(500);
    config.lease_duration_seconds = 6;
    config.lease_grace_seconds = 3;
    config.simulated_provider = Some(SimulatedProviderConfig {
        ready_after: Some(Duration::from_millis(300)),
        destroy_after: Duration::from_millis(300),
    });
    config
}

pub fn spawn_controllers(client: &Client, config: ControllerConfig) -> Running {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let metrics = Arc::new(Metrics::default());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(cluster::run_controllers(
        client.clone(),
        config,
        metrics.clone(),
        async move {
            let _ = stopped.await;
        },
    ));
    Running {
        metrics,
        stop: Some(stop),
        task,
    }
}

/// Installs the chart as Helm renders it (`cluster::chart`), with `policy`.
pub async fn install_chart(client: &Client, policy: &cluster::chart::ClaimSubjectPolicy) {
    cluster::chart::install(client, policy)
        .await
        .expect("the chart installs");
}

/// A cache filled once from a LIST and never updated: the controller's view, frozen.
pub async fn frozen_cache<K>(api: &Api<K>) -> kube::runtime::reflector::Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + 'static,
{
    let mut writer = kube::runtime::reflector::store::Writer::default();
    writer.apply_watcher_event(&kube::runtime::watcher::Event::Init);
    for obj in api.list(&ListParams::default()).await.unwrap().items {
        writer.apply_watcher_event(&kube::runtime::watcher::Event::InitApply(obj));
    }
    writer.apply_watcher_event(&kube::runtime::watcher::Event::InitDone);
    writer.as_reader()
}
