//! Conformance: the real `kubectl` (the one on PATH, or `$KUBECTL`) against the
//! emulator over loopback TLS. Each test starts its own emulator and stops by itself.
//!
//! With `BANLIEUE_KUBE_BACKEND=testbed` and `BANLIEUE_TESTBED_DIR` the same tests run on
//! the real kube-apiserver of the test bed, each in a namespace of its own, with its CRDs
//! in an API group of its own (see `common`).

mod common;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use common::Server;
use kube_emulator::EmulatorConfig;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

const CRD: &str = include_str!("fixtures/crd.yaml");
const CLAIM: &str = include_str!("fixtures/claim.yaml");
const TIMEOUT: Duration = Duration::from_secs(60);

struct Kubectl {
    server: Server,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    /// The fixture's claims with their API group (`vmc.banlieue.io` on the emulator): the
    /// bare short name is ambiguous on the test bed, where every test has its own CRD.
    vmc: String,
}

struct Out {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// `$KUBECTL`, else `kubectl` from PATH.
fn kubectl_bin() -> String {
    std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into())
}

impl Kubectl {
    async fn start() -> Self {
        let bin = kubectl_bin();
        let found = std::process::Command::new(&bin)
            .args(["version", "--client"])
            .output()
            .is_ok_and(|out| out.status.success());
        assert!(
            found,
            "these conformance tests need the real kubectl: none runs as {bin:?} (put one on \
             PATH or set KUBECTL)"
        );
        let server = Server::start("kubectl", EmulatorConfig::default()).await;
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, server.admin_kubeconfig_yaml()).expect("kubeconfig written");
        let vmc = format!("vmc.{}", server.group("banlieue.io"));
        let k = Self {
            server,
            dir,
            kubeconfig,
            vmc,
        };
        let namespace = format!("--namespace={}", k.server.namespace());
        k.ok(&["config", "set-context", "--current", &namespace])
            .await;
        k
    }

    /// `text` for this test's server (`Server::localize`).
    fn localize(&self, text: &str) -> String {
        self.server.localize(text)
    }

    async fn shutdown(self) {
        self.server.shutdown().await;
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(kubectl_bin());
        c.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .args(args)
            .env("HOME", self.dir.path())
            .stdin(Stdio::null())
            .kill_on_drop(true);
        c
    }

    async fn run(&self, args: &[&str]) -> Out {
        let out = tokio::time::timeout(TIMEOUT, self.command(args).output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} timed out"))
            .expect("kubectl runs");
        Out {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(
            out.ok,
            "kubectl {args:?} failed: {}{}",
            out.stdout, out.stderr
        );
        out.stdout
    }

    async fn fail(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(
            !out.ok,
            "kubectl {args:?} unexpectedly succeeded: {}",
            out.stdout
        );
        out.stderr
    }

    /// Writes `content`, localized, to a file in the test's directory.
    fn file(&self, name: &str, content: &str) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, self.localize(content)).expect("write manifest");
        p.to_string_lossy().into_owned()
    }

    /// Writes `content` as it is (a document read from the server) to a file.
    fn raw_file(&self, name: &str, content: &str) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, content).expect("write manifest");
        p.to_string_lossy().into_owned()
    }

    /// Applies a CRD manifest and waits until it is served.
    async fn apply_crd(&self, file: &str, manifest: &str, name: &str) {
        let crd = self.file(file, manifest);
        self.ok(&["apply", "-f", &crd]).await;
        let crd = format!("crd/{}", self.localize(name));
        self.ok(&["wait", "--for=condition=Established", "--timeout=60s", &crd])
            .await;
    }

    async fn with_crd_and_claim(&self) {
        self.apply_crd("crd.yaml", CRD, "virtualmachineclaims.banlieue.io")
            .await;
        let claim = self.file("claim.yaml", CLAIM);
        self.ok(&["apply", "-f", &claim]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_lists_builtins_and_crds() {
    let k = Kubectl::start().await;
    let out = k.ok(&["api-resources"]).await;
    for want in [
        "configmaps",
        "clusterrolebindings",
        "customresourcedefinitions",
        "selfsubjectaccessreviews",
        "validatingadmissionpolicies",
        "leases",
    ] {
        assert!(
            out.contains(want),
            "{want} missing from api-resources:\n{out}"
        );
    }
    k.with_crd_and_claim().await;
    let group = format!("--api-group={}", k.server.group("banlieue.io"));
    let out = k.ok(&["api-resources", &group]).await;
    assert!(
        out.contains("virtualmachineclaims") && out.contains("vmc"),
        "{out}"
    );
    let version = k.ok(&["version", "-o", "json"]).await;
    assert!(version.contains("serverVersion"), "{version}");
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_crd_and_cr_then_get_yaml_and_printer_columns() {
    let k = Kubectl::start().await;
    k.with_crd_and_claim().await;
    let yaml = k
        .ok(&[
            "get",
            &k.localize("virtualmachineclaims.banlieue.io"),
            "claim-a",
            "-o",
            "yaml",
        ])
        .await;
    for want in [
        "poolRef: pool-1",
        "ttlSeconds: 3600",
        "generation: 1",
        "uid:",
        "resourceVersion:",
        "creationTimestamp:",
    ] {
        assert!(yaml.contains(want), "{want} missing:\n{yaml}");
    }
    let table = k.ok(&["get", &k.vmc]).await;
    let header = table.lines().next().unwrap_or_default();
    assert!(
        header.contains("NAME")
            && header.contains("POOL")
            && header.contains("PHASE")
            && header.contains("AGE"),
        "{table}"
    );
    assert!(
        table.contains("claim-a") && table.contains("pool-1"),
        "{table}"
    );
    // Re-applying the same manifest changes nothing.
    let claim = k.file("claim.yaml", CLAIM);
    let again = k.ok(&["apply", "-f", &claim]).await;
    assert!(again.contains("unchanged"), "{again}");
    // The status subresource is separate from the main resource.
    k.ok(&[
        "patch",
        &k.vmc,
        "claim-a",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Bound"}}"#,
    ])
    .await;
    let table = k.ok(&["get", &k.vmc, "claim-a"]).await;
    assert!(table.contains("Bound"), "{table}");
    let generation = k
        .ok(&[
            "get",
            &k.vmc,
            "claim-a",
            "-o",
            "jsonpath={.metadata.generation}",
        ])
        .await;
    assert_eq!(generation, "1", "a status change must not bump generation");
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_sees_a_change() {
    let k = Kubectl::start().await;
    k.with_crd_and_claim().await;
    let mut child = k
        .command(&["get", &k.vmc, "-w", "--request-timeout=0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("watch starts");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = tokio::time::timeout(TIMEOUT, lines.next_line())
        .await
        .expect("header in time")
        .expect("read");
    assert!(first.is_some_and(|l| l.contains("NAME")));
    let initial = tokio::time::timeout(TIMEOUT, lines.next_line())
        .await
        .expect("row in time")
        .expect("read");
    assert!(initial.is_some_and(|l| l.contains("claim-a")));
    k.ok(&[
        "patch",
        &k.vmc,
        "claim-a",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Releasing"}}"#,
    ])
    .await;
    let seen = tokio::time::timeout(Duration::from_secs(20), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("claim-a") && line.contains("Releasing") {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    let _ = child.kill().await;
    assert!(seen, "kubectl get -w did not print the change");
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_merge_and_json() {
    let k = Kubectl::start().await;
    k.with_crd_and_claim().await;
    k.ok(&[
        "patch",
        &k.vmc,
        "claim-a",
        "--type=merge",
        "-p",
        r#"{"spec":{"ttlSeconds":7200}}"#,
    ])
    .await;
    k.ok(&[
        "patch",
        &k.vmc,
        "claim-a",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/poolRef","value":"pool-2"}]"#,
    ])
    .await;
    let spec = k
        .ok(&[
            "get",
            &k.vmc,
            "claim-a",
            "-o",
            "jsonpath={.spec.poolRef} {.spec.ttlSeconds} {.metadata.generation}",
        ])
        .await;
    assert_eq!(spec, "pool-2 7200 3");
    let err = k
        .fail(&[
            "patch",
            &k.vmc,
            "claim-a",
            "--type=json",
            "-p",
            r#"[{"op":"test","path":"/spec/poolRef","value":"nope"}]"#,
        ])
        .await;
    assert!(err.contains("Invalid") || err.contains("invalid"), "{err}");
    // Built-ins take strategic merge patches (kubectl's default for them).
    k.ok(&["create", "configmap", "settings", "--from-literal=a=1"])
        .await;
    k.ok(&[
        "patch",
        "configmap",
        "settings",
        "-p",
        r#"{"data":{"b":"2"}}"#,
    ])
    .await;
    let data = k
        .ok(&["get", "cm", "settings", "-o", "jsonpath={.data.a}{.data.b}"])
        .await;
    assert_eq!(data, "12");
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_waits_for_finalizer() {
    let k = Kubectl::start().await;
    k.with_crd_and_claim().await;
    k.ok(&[
        "patch",
        &k.vmc,
        "claim-a",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":["banlieue.io/claim-protection"]}}"#,
    ])
    .await;
    let mut deleting = k
        .command(&["delete", &k.vmc, "claim-a", "--timeout=50s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("delete starts");
    // Once the DELETE has reached the server, the object is marked and kept.
    let start = std::time::Instant::now();
    loop {
        let ts = k
            .ok(&[
                "get",
                &k.vmc,
                "claim-a",
                "-o",
                "jsonpath={.metadata.deletionTimestamp}",
            ])
            .await;
        if !ts.is_empty() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "deletionTimestamp not set"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        deleting.try_wait().expect("poll").is_none(),
        "kubectl delete returned while a finalizer remained"
    );
    k.ok(&[
        "patch",
        &k.vmc,
        "claim-a",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ])
    .await;
    let status = tokio::time::timeout(Duration::from_secs(30), deleting.wait())
        .await
        .expect("delete finishes")
        .expect("wait");
    assert!(status.success());
    let err = k.fail(&["get", &k.vmc, "claim-a"]).await;
    assert!(
        err.contains("NotFound") || err.contains("not found"),
        "{err}"
    );
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_can_i_with_impersonation_and_forbidden_reason() {
    let k = Kubectl::start().await;
    k.with_crd_and_claim().await;
    let claims = k.localize("virtualmachineclaims.banlieue.io");
    let role = k.server.cluster_name("claim-viewer");
    k.ok(&[
        "create",
        "clusterrole",
        &role,
        "--verb=get,list,watch",
        &format!("--resource={claims}"),
    ])
    .await;
    k.ok(&[
        "create",
        "clusterrolebinding",
        &k.server.cluster_name("viewers"),
        &format!("--clusterrole={role}"),
        "--group=console:viewer",
    ])
    .await;
    k.ok(&[
        "create",
        "role",
        "cm-reader",
        "--verb=get",
        "--resource=configmaps",
        "--resource-name=settings",
    ])
    .await;
    k.ok(&[
        "create",
        "rolebinding",
        "bob-reads",
        "--role=cm-reader",
        "--user=bob",
    ])
    .await;
    let yes = k
        .ok(&[
            "auth",
            "can-i",
            "list",
            &claims,
            "--as=alice",
            "--as-group=console:viewer",
        ])
        .await;
    assert_eq!(yes.trim(), "yes");
    let no = k
        .run(&[
            "auth",
            "can-i",
            "delete",
            &claims,
            "--as=alice",
            "--as-group=console:viewer",
        ])
        .await;
    assert_eq!(no.stdout.trim(), "no");
    assert!(!no.ok);
    let named = k
        .ok(&["auth", "can-i", "get", "configmap/settings", "--as=bob"])
        .await;
    assert_eq!(named.trim(), "yes");
    let other = k
        .run(&["auth", "can-i", "get", "configmap/other", "--as=bob"])
        .await;
    assert_eq!(other.stdout.trim(), "no");
    let err = k.fail(&["get", &k.vmc, "--as=bob"]).await;
    let want = format!(
        r#"virtualmachineclaims.banlieue.io is forbidden: User "bob" cannot list resource "virtualmachineclaims" in API group "banlieue.io" in the namespace "{}""#,
        k.server.namespace()
    );
    assert!(err.contains(&k.localize(&want)), "{err}");
    let who = k
        .ok(&["auth", "whoami", "--as=alice", "--as-group=console:viewer"])
        .await;
    assert!(
        who.contains("alice") && who.contains("console:viewer"),
        "{who}"
    );
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_replace_gets_409() {
    let k = Kubectl::start().await;
    k.with_crd_and_claim().await;
    let stale = k.ok(&["get", &k.vmc, "claim-a", "-o", "yaml"]).await;
    let stale_path = k.raw_file("stale.yaml", &stale);
    k.ok(&["label", &k.vmc, "claim-a", "changed=yes"]).await;
    let err = k.fail(&["replace", "-f", &stale_path]).await;
    assert!(
        err.contains("Conflict") && err.contains("the object has been modified"),
        "{err}"
    );
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_of_a_custom_resource_needs_a_resource_version() {
    let k = Kubectl::start().await;
    k.with_crd_and_claim().await;
    let current = k.ok(&["get", &k.vmc, "claim-a", "-o", "json"]).await;
    let mut doc: serde_json::Value = serde_json::from_str(&current).unwrap();
    doc["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let path = k.raw_file("no-rv.json", &doc.to_string());
    // Plain `kubectl replace` fills in the current resourceVersion itself; `--raw` sends
    // the document as it is, like any other API client.
    let err = k
        .fail(&[
            "replace",
            "--raw",
            &k.localize(&format!(
                "/apis/banlieue.io/v1alpha1/namespaces/{}/virtualmachineclaims/claim-a",
                k.server.namespace()
            )),
            "-f",
            &path,
        ])
        .await;
    assert!(
        err.contains(
            r#"The virtualmachineclaims "claim-a" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update"#
        ),
        "{err}"
    );
    // A built-in kind may be replaced unconditionally, as on a real API server.
    k.ok(&["create", "configmap", "plain", "--from-literal=a=1"])
        .await;
    let cm = k.ok(&["get", "configmap", "plain", "-o", "json"]).await;
    let mut cm: serde_json::Value = serde_json::from_str(&cm).unwrap();
    cm["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    cm["data"]["a"] = "2".into();
    let path = k.raw_file("cm.json", &cm.to_string());
    k.ok(&["replace", "-f", &path]).await;
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_validation_errors_for_bad_crs() {
    let k = Kubectl::start().await;
    k.with_crd_and_claim().await;
    let bad = k.file(
        "bad.yaml",
        "apiVersion: banlieue.io/v1alpha1\nkind: VirtualMachineClaim\nmetadata:\n  name: bad\nspec:\n  poolRef: p\n  ttlSeconds: not-a-number\n",
    );
    // A wrong type keeps the CEL rules from running, which the server says too.
    const NOT_CHECKED: &str = "* <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";
    let err = k.fail(&["apply", "-f", &bad]).await;
    assert!(
        err.contains(&format!(
            "The VirtualMachineClaim \"bad\" is invalid: \n\
             * spec.ttlSeconds: Invalid value: \"string\": spec.ttlSeconds in body must be of type integer: \"string\"\n\
             {NOT_CHECKED}"
        )),
        "{err}"
    );
    let missing = k.file("missing.yaml", "apiVersion: banlieue.io/v1alpha1\nkind: VirtualMachineClaim\nmetadata:\n  name: bad2\nspec: {}\n");
    let err = k.fail(&["create", "-f", &missing]).await;
    assert!(
        err.contains(&format!(
            "The VirtualMachineClaim \"bad2\" is invalid: \n\
             * spec.poolRef: Required value\n{NOT_CHECKED}"
        )),
        "{err}"
    );
    let unknown = k.file("unknown.yaml", "apiVersion: banlieue.io/v1alpha1\nkind: VirtualMachineClaim\nmetadata:\n  name: bad3\nspec:\n  poolRef: p\n  bogus: 1\n");
    let err = k.fail(&["create", "-f", &unknown]).await;
    assert!(err.contains(r#"unknown field "spec.bogus""#), "{err}");
    let err = k
        .fail(&[
            "patch",
            &k.vmc,
            "claim-a",
            "--type=merge",
            "-p",
            r#"{"spec":{"ttlSeconds":90000}}"#,
        ])
        .await;
    assert!(
        err.contains(
            r#"The VirtualMachineClaim "claim-a" is invalid: spec: Invalid value: ttlSeconds must be at most a day"#
        ),
        "CEL rule: {err}"
    );
    let err = k
        .fail(&[
            "patch",
            &k.vmc,
            "claim-a",
            "--type=merge",
            "-p",
            r#"{"spec":{"ttlSeconds":10}}"#,
        ])
        .await;
    assert!(
        err.contains(
            r#"The VirtualMachineClaim "claim-a" is invalid: spec.ttlSeconds: Invalid value: 10: spec.ttlSeconds in body should be greater than or equal to 60"#
        ),
        "minimum: {err}"
    );
    let ok = k.ok(&["create", "-f", &unknown, "--validate=false"]).await;
    assert!(ok.contains("created"), "{ok}");
    let pruned = k
        .ok(&["get", &k.vmc, "bad3", "-o", "jsonpath={.spec}"])
        .await;
    assert!(
        !pruned.contains("bogus"),
        "unknown field must be pruned: {pruned}"
    );
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_and_generate_name() {
    let k = Kubectl::start().await;
    k.ok(&[
        "create",
        "configmap",
        "dry",
        "--from-literal=a=1",
        "--dry-run=server",
    ])
    .await;
    let err = k.fail(&["get", "cm", "dry"]).await;
    assert!(err.contains("not found"), "{err}");
    let generated = k.file(
        "gen.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  generateName: gen-\ndata:\n  a: b\n",
    );
    let out = k.ok(&["create", "-f", &generated, "-o", "name"]).await;
    assert!(
        out.trim().starts_with("configmap/gen-") && out.trim().len() == "configmap/gen-".len() + 5,
        "{out}"
    );
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_removes_fields_and_reports_conflicts() {
    let k = Kubectl::start().await;
    let v1 = k.file(
        "v1.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\ndata:\n  a: \"1\"\n  b: \"2\"\n",
    );
    k.ok(&["apply", "--server-side", "-f", &v1]).await;
    let v2 = k.file(
        "v2.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\ndata:\n  a: \"1\"\n",
    );
    k.ok(&["apply", "--server-side", "-f", &v2]).await;
    let data = k.ok(&["get", "cm", "s", "-o", "jsonpath={.data}"]).await;
    assert_eq!(data, r#"{"a":"1"}"#);
    let other = k.file(
        "other.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\ndata:\n  a: \"5\"\n",
    );
    let err = k
        .fail(&[
            "apply",
            "--server-side",
            "--field-manager=other",
            "-f",
            &other,
        ])
        .await;
    assert!(
        err.contains(r#"Apply failed with 1 conflict: conflict with "kubectl": .data.a"#),
        "{err}"
    );
    k.ok(&[
        "apply",
        "--server-side",
        "--field-manager=other",
        "--force-conflicts",
        "-f",
        &other,
    ])
    .await;
    let data = k.ok(&["get", "cm", "s", "-o", "jsonpath={.data.a}"]).await;
    assert_eq!(data, "5");
    k.shutdown().await;
}

const WIDGET_CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.io
spec:
  group: example.io
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port: {type: integer}
              tags:
                type: array
                x-kubernetes-list-type: set
                items: {type: string}
";

fn widget(ports: &str, tags: &str, finalizer: &str) -> String {
    format!(
        "apiVersion: example.io/v1\nkind: Widget\nmetadata:\n  name: w\n  finalizers: [{finalizer}]\nspec:\n  ports: {ports}\n  tags: {tags}\n"
    )
}

async fn get_widget(k: &Kubectl, output: &str) -> String {
    let widget = format!("widget.{}", k.server.group("example.io"));
    k.ok(&["get", &widget, "w", "-o", output]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_merges_keyed_lists_and_names_update_managers() {
    let k = Kubectl::start().await;
    k.apply_crd("widget-crd.yaml", WIDGET_CRD, "widgets.example.io")
        .await;
    let a = k.file(
        "a.yaml",
        &widget("[{name: http, port: 80}]", "[a]", "example.io/a"),
    );
    let b = k.file(
        "b.yaml",
        &widget("[{name: dns, port: 53}]", "[b]", "example.io/b"),
    );
    k.ok(&["apply", "--server-side", "--field-manager=team-a", "-f", &a])
        .await;
    k.ok(&["apply", "--server-side", "--field-manager=team-b", "-f", &b])
        .await;
    assert_eq!(
        get_widget(&k, "jsonpath={.spec.ports[*].name}").await,
        "http dns",
        "map lists merge by key"
    );
    assert_eq!(
        get_widget(&k, "jsonpath={.spec.tags}").await,
        r#"["a","b"]"#
    );
    assert_eq!(
        get_widget(&k, "jsonpath={.metadata.finalizers}").await,
        k.localize(r#"["example.io/a","example.io/b"]"#),
        "finalizers are a set"
    );
    let b2 = k.file(
        "b2.yaml",
        &widget("[{name: http, port: 8080}]", "[b]", "example.io/b"),
    );
    let err = k
        .fail(&[
            "apply",
            "--server-side",
            "--field-manager=team-b",
            "-f",
            &b2,
        ])
        .await;
    assert!(
        err.contains(
            r#"Apply failed with 1 conflict: conflict with "team-a": .spec.ports[name="http"].port"#
        ),
        "{err}"
    );
    // team-a stops applying its port and tag: only its own elements go.
    let a2 = k.file("a2.yaml", &widget("[]", "[]", "example.io/a"));
    k.ok(&[
        "apply",
        "--server-side",
        "--field-manager=team-a",
        "-f",
        &a2,
    ])
    .await;
    assert_eq!(
        get_widget(&k, "jsonpath={.spec.ports[*].name}").await,
        "dns"
    );
    assert_eq!(get_widget(&k, "jsonpath={.spec.tags}").await, r#"["b"]"#);

    // Writes other than apply own what they change, under kubectl's manager names.
    k.ok(&["create", "configmap", "c", "--from-literal=a=1"])
        .await;
    k.ok(&[
        "patch",
        "cm",
        "c",
        "--type=merge",
        "-p",
        r#"{"data":{"b":"2"}}"#,
    ])
    .await;
    let c = k.file(
        "c.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: \"5\"\n  b: \"2\"\n",
    );
    let err = k.fail(&["apply", "--server-side", "-f", &c]).await;
    assert!(
        err.contains(
            r#"Apply failed with 1 conflict: conflict with "kubectl-create" using v1: .data.a"#
        ),
        "{err}"
    );
    k.ok(&["apply", "--server-side", "--force-conflicts", "-f", &c])
        .await;
    let managers = k
        .ok(&[
            "get",
            "cm",
            "c",
            "--show-managed-fields",
            "-o",
            "jsonpath={range .metadata.managedFields[*]}{.manager}/{.operation} {end}",
        ])
        .await;
    assert_eq!(
        managers.trim(),
        "kubectl/Apply kubectl-create/Update kubectl-patch/Update",
        "the forced apply took data.a from kubectl-create, which keeps the data map it \
         created; appliers come first"
    );
    k.shutdown().await;
}
