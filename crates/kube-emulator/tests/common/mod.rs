//! Helpers shared by the integration tests (included with `mod common;`).
//!
//! One harness, two backends (the conformance suites `kubectl` and `kube_rs`): by
//! default [`Server::start`] starts a fresh emulator of the test's own; with
//! `BANLIEUE_KUBE_BACKEND=testbed` (and `BANLIEUE_TESTBED_DIR`) it hands out the real
//! kube-apiserver of the test bed (`scripts/testbed`) instead, with a namespace of the
//! test's own. The test bed is shared by every test of a run and holds the chart's CRDs,
//! so a test's cluster-scoped objects get names of their own there: its custom resources
//! live in an API group of their own ([`Server::group`], [`Server::localize`]), its
//! ClusterRoles and bindings carry a suffix of their own ([`Server::cluster_name`]), and
//! [`Server::shutdown`] deletes them with the namespace (as does dropping the server, so
//! a failed test leaves nothing behind either).
#![allow(dead_code)]

use banlieue_testbed::Testbed;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams};
use kube::api::{Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, ResourceExt};
use kube_emulator::{Emulator, EmulatorConfig};

/// `BANLIEUE_KUBE_BACKEND=testbed` runs the conformance suites on the test bed.
pub fn on_testbed() -> bool {
    std::env::var("BANLIEUE_KUBE_BACKEND").as_deref() == Ok("testbed")
}

/// The API groups the suites' fixtures use; on the test bed each test gets one of its own
/// in their place.
const FIXTURE_GROUPS: [&str; 2] = ["banlieue.io", "example.io"];

/// The API server a test runs against.
pub enum Server {
    /// A fresh emulator of the test's own.
    Emulator(Emulator),
    /// The shared real kube-apiserver and what the test has there.
    Testbed(OnTestbed),
}

/// A test's share of the test bed.
pub struct OnTestbed {
    bed: Testbed,
    /// The test's namespace.
    namespace: String,
    /// The test's suffix for cluster-scoped names (`[a-z0-9]{8}`).
    id: String,
    cleaned: bool,
}

impl Drop for OnTestbed {
    /// A test that did not reach [`Server::shutdown`] (it failed) is cleaned up here, on
    /// a thread of its own, since the test's runtime may be gone.
    fn drop(&mut self) {
        if self.cleaned {
            return;
        }
        let (bed, namespace, id) = (self.bed.clone(), self.namespace.clone(), self.id.clone());
        let _ = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime")
                .block_on(clean_up(&bed, &namespace, &id));
        })
        .join();
    }
}

impl Server {
    /// A fresh emulator started with `config`, or on the test bed (where `config` means
    /// nothing) the real API server and a new namespace named after `test`.
    pub async fn start(test: &str, config: EmulatorConfig) -> Self {
        if on_testbed() {
            let bed = Testbed::from_env("BANLIEUE_KUBE_BACKEND=testbed")
                .expect("BANLIEUE_KUBE_BACKEND=testbed needs BANLIEUE_TESTBED_DIR");
            let namespace = bed.namespace(test).await.name;
            let id = namespace.rsplit('-').next().expect("suffix").to_owned();
            Self::Testbed(OnTestbed {
                bed,
                namespace,
                id,
                cleaned: false,
            })
        } else {
            Self::Emulator(Emulator::start(config).await.expect("emulator starts"))
        }
    }

    /// `true` on the real kube-apiserver.
    pub fn is_real(&self) -> bool {
        matches!(self, Self::Testbed(..))
    }

    /// The emulator, or `None` on the test bed.
    pub fn emulator(&self) -> Option<&Emulator> {
        match self {
            Self::Emulator(emu) => Some(emu),
            Self::Testbed(..) => None,
        }
    }

    /// `true` (after printing why `what` is skipped) on the test bed: for tests of what
    /// only the emulator has.
    pub fn skip_on_testbed(&self, what: &str) -> bool {
        if self.is_real() {
            eprintln!("skipped on the real kube-apiserver: {what}");
        }
        self.is_real()
    }

    /// The test's namespace.
    pub fn namespace(&self) -> &str {
        match self {
            Self::Emulator(_) => "default",
            Self::Testbed(t) => &t.namespace,
        }
    }

    /// The API group standing for the fixtures' `group` (`banlieue.io`, `example.io`):
    /// itself on the emulator, `<suffix>.example.io` on the test bed (where the chart
    /// owns `banlieue.io`).
    pub fn group(&self, group: &str) -> String {
        assert!(FIXTURE_GROUPS.contains(&group), "no fixture group: {group}");
        match self {
            Self::Emulator(_) => group.to_owned(),
            Self::Testbed(t) => format!("{}.example.io", t.id),
        }
    }

    /// `text` (a manifest, a path, an expected message) with the fixture groups replaced
    /// by [`Server::group`] and `namespace: default` by the test's namespace.
    pub fn localize(&self, text: &str) -> String {
        if !self.is_real() {
            return text.to_owned();
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        'scan: while !rest.is_empty() {
            for group in FIXTURE_GROUPS {
                if let Some(after) = rest.strip_prefix(group) {
                    out.push_str(&self.group(group));
                    rest = after;
                    continue 'scan;
                }
            }
            let c = rest.chars().next().expect("not empty");
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
        out.replace(
            "namespace: default",
            &format!("namespace: {}", self.namespace()),
        )
    }

    /// A name for a cluster-scoped object (ClusterRole, ClusterRoleBinding): `name` on
    /// the emulator, `name-<suffix>` on the test bed.
    pub fn cluster_name(&self, name: &str) -> String {
        match self {
            Self::Emulator(_) => name.to_owned(),
            Self::Testbed(t) => format!("{name}-{}", t.id),
        }
    }

    /// An admin kubeconfig, as YAML (its context has no namespace).
    pub fn admin_kubeconfig_yaml(&self) -> String {
        match self {
            Self::Emulator(emu) => emu.kubeconfig_yaml(),
            Self::Testbed(t) => t.bed.admin_kubeconfig(),
        }
    }

    /// An admin kube client whose default namespace is the test's.
    pub async fn admin_client(&self) -> Client {
        let mut kubeconfig =
            Kubeconfig::from_yaml(&self.admin_kubeconfig_yaml()).expect("kubeconfig parses");
        for context in &mut kubeconfig.contexts {
            if let Some(context) = context.context.as_mut() {
                context.namespace = Some(self.namespace().to_owned());
            }
        }
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .expect("config");
        Client::try_from(config).expect("client")
    }

    /// Stops the emulator, or on the test bed deletes what the test made there.
    pub async fn shutdown(self) {
        match self {
            Self::Emulator(emu) => emu.shutdown().await,
            Self::Testbed(mut t) => {
                clean_up(&t.bed, &t.namespace, &t.id).await;
                t.cleaned = true;
            }
        }
    }
}

/// Deletes what the test with suffix `id` made on the test bed: the custom resources of
/// its group (finalizers cleared first, so nothing is left waiting), the group's CRDs,
/// its ClusterRoles and ClusterRoleBindings, and its namespace, without waiting for them
/// to be gone.
async fn clean_up(bed: &Testbed, namespace: &str, id: &str) {
    let client = bed.admin_client().await;
    let group = format!("{id}.example.io");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds.list(&ListParams::default()).await.expect("list CRDs") {
        if crd.spec.group != group {
            continue;
        }
        for version in &crd.spec.versions {
            let gvk = GroupVersionKind::gvk(&group, &version.name, &crd.spec.names.kind);
            let ar = ApiResource::from_gvk_with_plural(&gvk, &crd.spec.names.plural);
            let objects: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
            let Ok(list) = objects.list(&ListParams::default()).await else {
                continue;
            };
            for obj in list.into_iter().filter(|o| !o.finalizers().is_empty()) {
                let ns = obj.namespace().unwrap_or_default();
                let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
                let clear = serde_json::json!({"metadata": {"finalizers": null}});
                let _ = api
                    .patch(
                        &obj.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(clear),
                    )
                    .await;
            }
        }
        let _ = crds
            .delete(&crd.name_any(), &DeleteParams::background())
            .await;
    }
    let suffix = format!("-{id}");
    let roles: Api<ClusterRole> = Api::all(client.clone());
    for role in roles.list(&ListParams::default()).await.expect("list") {
        if role.name_any().ends_with(&suffix) {
            let _ = roles
                .delete(&role.name_any(), &DeleteParams::default())
                .await;
        }
    }
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    for binding in bindings.list(&ListParams::default()).await.expect("list") {
        if binding.name_any().ends_with(&suffix) {
            let _ = bindings
                .delete(&binding.name_any(), &DeleteParams::default())
                .await;
        }
    }
    let namespaces: Api<Namespace> = Api::all(client);
    let _ = namespaces
        .delete(namespace, &DeleteParams::background())
        .await;
}

/// Starts an emulator and an admin client.
pub async fn start(config: EmulatorConfig) -> (Emulator, Client) {
    let emu = Emulator::start(config).await.expect("emulator starts");
    let client = client_for(&emu, emu.admin_token()).await;
    (emu, client)
}

/// A kube client that presents `token`.
pub async fn client_for(emu: &Emulator, token: &str) -> Client {
    let kubeconfig = Kubeconfig::from_yaml(&emu.kubeconfig_for(token)).expect("kubeconfig parses");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config");
    Client::try_from(config).expect("client")
}

/// A raw HTTPS client trusting the emulator's CA.
pub fn https(emu: &Emulator) -> reqwest::Client {
    let ca = reqwest::Certificate::from_pem(emu.ca_pem().expect("TLS on").as_bytes()).expect("CA");
    reqwest::Client::builder()
        .add_root_certificate(ca)
        .build()
        .expect("client")
}

/// The `(code, reason, message)` of an API error.
pub fn api_error<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> (u16, String, String) {
    match r {
        Err(kube::Error::Api(s)) => (s.code, s.reason, s.message),
        other => panic!("expected an API error, got {other:?}"),
    }
}
