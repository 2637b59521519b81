//! The real Kubernetes test bed as the Rust suites reach it (and, in [`postgres`], the
//! throw-away PostgreSQL server).
//!
//! `scripts/testbed start` (run by `make test`) builds kube-apiserver,
//! kube-controller-manager, etcd and helm from the Go modules pinned in `testenv/`, starts
//! them on loopback, installs the chart with helm and prints a directory; the suites find
//! it through `BANLIEUE_TESTBED_DIR`. Without that variable [`Testbed::from_env`] says so
//! on stderr and the real-cluster half of a suite is skipped, as the PostgreSQL half of
//! the store suite is without `BANLIEUE_TEST_POSTGRES_URL`.
//!
//! One API server serves every test of a run, so each test works in its own namespace
//! ([`Testbed::namespace`]) and names cluster-wide objects it creates uniquely.

pub mod postgres;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};

/// The variable naming the test bed's directory.
pub const DIR_VARIABLE: &str = "BANLIEUE_TESTBED_DIR";
/// The chart's release namespace in the test bed (`helm install -n banlieue-system`).
pub const RELEASE_NAMESPACE: &str = "banlieue-system";
/// The chart's release name in the test bed.
pub const RELEASE: &str = "banlieue";

/// A running test bed: the directory `scripts/testbed start` printed.
#[derive(Clone, Debug)]
pub struct Testbed {
    dir: PathBuf,
}

impl Testbed {
    /// The test bed named by `BANLIEUE_TESTBED_DIR`, or `None` (saying on stderr that
    /// `what` is skipped) when the variable is unset. Panics when it is set but names no
    /// test bed: a suite asked for the real cluster must not pass without it.
    pub fn from_env(what: &str) -> Option<Self> {
        let Some(dir) = std::env::var_os(DIR_VARIABLE) else {
            eprintln!(
                "{DIR_VARIABLE} is not set: {what} on the real kube-apiserver skipped \
                 (make test sets it; or `export {DIR_VARIABLE}=$(scripts/testbed start)`)"
            );
            return None;
        };
        let dir = PathBuf::from(dir);
        assert!(
            dir.join("admin.kubeconfig").is_file(),
            "{DIR_VARIABLE}={} holds no test bed (start one with scripts/testbed start)",
            dir.display()
        );
        Some(Self { dir })
    }

    /// The test bed's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn read(&self, file: &str) -> String {
        let path = self.dir.join(file);
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
    }

    /// The admin kubeconfig (a static token in `system:masters`), as YAML.
    pub fn admin_kubeconfig(&self) -> String {
        self.read("admin.kubeconfig")
    }

    /// The kubeconfig of the console's ServiceAccount
    /// (`system:serviceaccount:banlieue-system:banlieue-console`), which holds what the
    /// chart grants it: impersonation and the controllers' rights.
    pub fn console_kubeconfig_path(&self) -> PathBuf {
        self.dir.join("console.kubeconfig")
    }

    /// The API server's URL (`https://127.0.0.1:<port>`).
    pub fn server(&self) -> String {
        let kubeconfig = Kubeconfig::from_yaml(&self.admin_kubeconfig()).expect("kubeconfig");
        kubeconfig.clusters[0]
            .cluster
            .as_ref()
            .and_then(|c| c.server.clone())
            .expect("server")
    }

    /// The file of the CA that signed the API server's and the issuer's certificates.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// The one OIDC issuer the API server trusts (its `AuthenticationConfiguration`):
    /// a console serving [`Testbed::issuer_cert_file`] on this URL is that issuer.
    pub fn issuer_url(&self) -> String {
        self.read("issuer-url").trim().to_owned()
    }

    /// A certificate for 127.0.0.1 signed by [`Testbed::ca_file`], for the issuer.
    pub fn issuer_cert_file(&self) -> PathBuf {
        self.dir.join("issuer.crt")
    }

    /// The key of [`Testbed::issuer_cert_file`].
    pub fn issuer_key_file(&self) -> PathBuf {
        self.dir.join("issuer.key")
    }

    /// A kube client for the admin.
    pub async fn admin_client(&self) -> Client {
        client_from_yaml(&self.admin_kubeconfig()).await
    }

    /// The admin client impersonating `user` with `groups`, as the console does.
    pub async fn impersonating(&self, user: &str, groups: &[&str]) -> Client {
        let kubeconfig = Kubeconfig::from_yaml(&self.admin_kubeconfig()).expect("kubeconfig");
        let mut config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .expect("config");
        config.auth_info.impersonate = Some(user.into());
        config.auth_info.impersonate_groups = Some(groups.iter().map(|g| g.to_string()).collect());
        Client::try_from(config).expect("client")
    }

    /// Creates a namespace of its own for one test (`<prefix>-<random>`), deleted with
    /// everything in it by [`TestNamespace::delete`] (the namespace controller of the
    /// test bed's kube-controller-manager empties it).
    pub async fn namespace(&self, prefix: &str) -> TestNamespace {
        let name = unique_name(prefix);
        let client = self.admin_client().await;
        let api: Api<Namespace> = Api::all(client.clone());
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}
        }))
        .unwrap();
        api.create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
        TestNamespace { name, client }
    }

    /// The test bed's `helm`, with its caches in the test bed and the admin's kubeconfig.
    pub fn helm(&self) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(self.dir.join("bin/helm"));
        let helm = self.dir.join("helm");
        command
            .env("HELM_CACHE_HOME", helm.join("cache"))
            .env("HELM_CONFIG_HOME", helm.join("config"))
            .env("HELM_DATA_HOME", helm.join("data"))
            .env("KUBECONFIG", self.dir.join("admin.kubeconfig"))
            .stdin(Stdio::null())
            .kill_on_drop(true);
        command
    }

    /// Runs the test bed's helm with `args`; its stdout, or a panic with its stderr.
    pub async fn helm_ok(&self, args: &[&str]) -> String {
        let out = tokio::time::timeout(Duration::from_secs(120), self.helm().args(args).output())
            .await
            .unwrap_or_else(|_| panic!("helm {args:?} timed out"))
            .expect("helm runs");
        assert!(
            out.status.success(),
            "helm {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("helm prints UTF-8")
    }
}

/// `prefix-` and eight random lower-case letters and digits: a Kubernetes name no other
/// test of the run uses.
pub fn unique_name(prefix: &str) -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::thread_rng();
    let suffix: String = (0..8)
        .map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())] as char)
        .collect();
    format!("{prefix}-{suffix}")
}

/// Lets the console's ServiceAccount hold Leases of any name in the release namespace,
/// where the chart allows it `banlieue-console-controllers` alone: the suites run many
/// controllers at once on one cluster (the test bed, or an emulator), each electing its
/// leader through a Lease named for its test. Applied server-side by `admin` (a cluster
/// admin), so every test may call it, at once too.
pub async fn allow_leases_of_any_name(admin: &Client) {
    let objects = [
        (
            "Role",
            serde_json::json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "test-leases", "namespace": RELEASE_NAMESPACE},
                "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                           "verbs": ["get", "update", "patch"]}],
            }),
        ),
        (
            "RoleBinding",
            serde_json::json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "test-leases", "namespace": RELEASE_NAMESPACE},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                            "name": "test-leases"},
                "subjects": [{"kind": "ServiceAccount", "name": "banlieue-console",
                              "namespace": RELEASE_NAMESPACE}],
            }),
        ),
    ];
    for (kind, object) in objects {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
            "rbac.authorization.k8s.io",
            "v1",
            kind,
        ));
        let api: Api<DynamicObject> =
            Api::namespaced_with(admin.clone(), RELEASE_NAMESPACE, &resource);
        api.patch(
            "test-leases",
            &PatchParams::apply("banlieue-tests").force(),
            &Patch::Apply(&object),
        )
        .await
        .unwrap_or_else(|e| panic!("the tests' {kind} for Leases: {e}"));
    }
}

/// A kube client from a kubeconfig's YAML.
async fn client_from_yaml(yaml: &str) -> Client {
    let kubeconfig = Kubeconfig::from_yaml(yaml).expect("kubeconfig parses");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config");
    Client::try_from(config).expect("client")
}

/// A namespace one test owns on the test bed.
pub struct TestNamespace {
    /// Its name.
    pub name: String,
    client: Client,
}

/// The banlieue kinds whose objects carry finalizers that only running controllers or
/// providers remove: a test's namespace would stay Terminating with them.
const FINALIZED: [(&str, &str); 2] = [
    ("VirtualMachineClaim", "virtualmachineclaims"),
    ("VirtualMachine", "virtualmachines"),
];

impl TestNamespace {
    /// Deletes the namespace (and, through the namespace controller, what is in it)
    /// without waiting for it to be gone. The test's controllers have stopped by then, so
    /// the finalizers of its claims and VMs are cleared first.
    pub async fn delete(self) {
        for (kind, plural) in FINALIZED {
            let gvk = GroupVersionKind::gvk("banlieue.io", "v1alpha1", kind);
            let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), &self.name, &resource);
            let Ok(objects) = api.list(&Default::default()).await else {
                continue;
            };
            let clear = Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}}));
            for object in objects {
                let name = object.metadata.name.unwrap_or_default();
                let _ = api.patch(&name, &PatchParams::default(), &clear).await;
            }
        }
        let api: Api<Namespace> = Api::all(self.client);
        let _ = api.delete(&self.name, &DeleteParams::background()).await;
    }
}

/// A cluster that does not answer: a loopback listener that takes connections and never
/// replies, for tests of what the console does while the API server stalls. Its URL,
/// and the task holding the connections (abort it to close them).
pub async fn silent_cluster() -> (String, tokio::task::JoinHandle<()>) {
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let url = format!("http://{}", silent.local_addr().expect("its address"));
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            open.push(socket);
        }
    });
    (url, held)
}
