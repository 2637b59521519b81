//! The chart under the real `helm` and the real kube-apiserver of the test bed
//! (`scripts/testbed`, which installs it with `helm install`): what Helm installed is
//! what the API server holds, and what the in-process clusters apply
//! (`cluster::chart`) is what Helm renders; the values and their schema; every example
//! values file rendered, accepted by the API server and installed. Without the test bed
//! only the in-process install runs (on the emulator).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use banlieue_testbed::{RELEASE, RELEASE_NAMESPACE, Testbed, unique_name};
use cluster::chart::{self, ClaimSubjectPolicy};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{Discovery, Scope};
use serde_json::{Value, json};

/// The chart's directory.
const CHART: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../charts/banlieue-console");

fn testbed() -> Option<Testbed> {
    Testbed::from_env("the chart suite")
}

/// Where `installed` lacks or differs from something `manifest` says (the API server adds
/// defaults and metadata, which do not count); `None` when it holds all of it.
fn missing_from(manifest: &serde_json::Value, installed: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    match (manifest, installed) {
        (Value::Object(want), Value::Object(have)) => {
            want.iter().find_map(|(key, value)| match have.get(key) {
                Some(have) => missing_from(value, have).map(|at| format!(".{key}{at}")),
                None => Some(format!(".{key}: missing")),
            })
        }
        (Value::Array(want), Value::Array(have)) if want.len() == have.len() => want
            .iter()
            .zip(have)
            .enumerate()
            .find_map(|(i, (w, h))| missing_from(w, h).map(|at| format!("[{i}]{at}"))),
        (want, have) if want == have => None,
        (want, have) => Some(format!(": {want} installed as {have}")),
    }
}

/// Objects by (kind, namespace, name), for comparing renderings.
fn by_key(objects: Vec<DynamicObject>) -> BTreeMap<(String, String, String), serde_json::Value> {
    objects
        .into_iter()
        .map(|o| {
            let kind = o.types.as_ref().map(|t| t.kind.clone()).unwrap_or_default();
            let key = (
                kind,
                o.metadata.namespace.clone().unwrap_or_default(),
                o.metadata.name.clone().unwrap_or_default(),
            );
            (key, serde_json::to_value(o).unwrap())
        })
        .collect()
}

#[tokio::test]
async fn the_committed_rendering_is_what_helm_renders() {
    let Some(bed) = testbed() else { return };
    let chart_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../charts/banlieue-console");
    let rendered = bed
        .helm_ok(&[
            "template",
            RELEASE,
            chart_dir,
            "-n",
            RELEASE_NAMESPACE,
            "--set",
            "simulatedProvider.enabled=true",
        ])
        .await;
    let committed = chart::RENDERED
        .split_once("\n---")
        .map(|(_, rest)| format!("---{rest}"))
        .expect("the committed rendering starts with its header");
    assert_eq!(
        committed, rendered,
        "charts/rendered/banlieue-console.yaml is stale: run scripts/render-chart"
    );

    // Values reach the chart only through the policies' CEL variables, as `manifests` sets them.
    let policy = ClaimSubjectPolicy {
        issuers: "https://a.example\nhttps://b.example\n".into(),
        brokers: "console:broker\n".into(),
        issuer_prefixes: "https://b.example=b:\n".into(),
    };
    let values = bed.dir().join("render-values.yaml");
    let yaml = serde_json::json!({"claimSubjectPolicy": {
        "issuers": policy.issuers, "brokers": policy.brokers,
        "issuerPrefixes": policy.issuer_prefixes,
    }, "simulatedProvider": {"enabled": true}});
    std::fs::write(&values, serde_json::to_string(&yaml).unwrap()).unwrap();
    let with_values = bed
        .helm_ok(&[
            "template",
            RELEASE,
            chart_dir,
            "-n",
            RELEASE_NAMESPACE,
            "-f",
            values.to_str().unwrap(),
        ])
        .await;
    let helm = by_key(chart::parse_documents(&with_values).unwrap());
    let ours = by_key(chart::manifests(&policy).unwrap());
    assert_eq!(
        helm.keys().collect::<Vec<_>>(),
        ours.keys().collect::<Vec<_>>()
    );
    for (key, object) in &helm {
        assert_eq!(
            object, &ours[key],
            "cluster::chart::manifests differs from helm template -f in {key:?}"
        );
    }

    // tenants.items reach the policies as ClaimSubjectPolicy::with_tenants puts them (the
    // dev cluster's setting, whose claims the server suite makes as tenant people).
    let example = Path::new(CHART).join("examples/tenants.yaml");
    let with_tenants = bed
        .helm_ok(&[
            "template",
            RELEASE,
            chart_dir,
            "-n",
            RELEASE_NAMESPACE,
            "-f",
            example.to_str().unwrap(),
        ])
        .await;
    let policies = |objects: Vec<DynamicObject>| {
        by_key(objects)
            .into_iter()
            .filter(|((kind, _, name), _)| {
                kind == "ValidatingAdmissionPolicy"
                    && [
                        "banlieue-claim-subject",
                        "banlieue-claim-release",
                        "banlieue-console-roles",
                    ]
                    .contains(&name.as_str())
            })
            .collect::<BTreeMap<_, _>>()
    };
    let helm = policies(chart::parse_documents(&with_tenants).unwrap());
    let ours = policies(
        chart::manifests(&ClaimSubjectPolicy::with_tenants(
            "https://console.example.org",
            [
                "https://idp.shared.example",
                "https://login.initech.example",
                "https://idp.shared.example",
            ],
        ))
        .unwrap(),
    );
    assert_eq!(helm.len(), 3);
    assert_eq!(helm, ours, "the tenants example's policies");
    let tenants: Vec<String> = chart::parse_documents(&with_tenants)
        .unwrap()
        .into_iter()
        .filter(|o| kind_of(o) == "ConsoleTenant")
        .map(|o| o.metadata.name.unwrap())
        .collect();
    assert_eq!(tenants, ["acme", "globex", "initech"]);
}

#[tokio::test]
async fn helm_lints_the_chart_and_the_api_server_holds_every_manifest_it_installed() {
    let Some(bed) = testbed() else { return };
    let chart_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../charts/banlieue-console");
    bed.helm_ok(&["lint", "--strict", chart_dir]).await;
    let status = bed
        .helm_ok(&["status", RELEASE, "-n", RELEASE_NAMESPACE, "-o", "json"])
        .await;
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["info"]["status"], "deployed", "{status}");

    let manifest = bed
        .helm_ok(&["get", "manifest", RELEASE, "-n", RELEASE_NAMESPACE])
        .await;
    let objects = chart::parse_documents(&manifest).unwrap();
    let client = bed.admin_client().await;
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let mut kinds = Vec::new();
    for object in &objects {
        let types = object.types.as_ref().expect("apiVersion and kind");
        let gvk = GroupVersionKind::try_from(types).unwrap();
        let (resource, caps) = discovery
            .resolve_gvk(&gvk)
            .unwrap_or_else(|| panic!("the API server does not serve {gvk:?}"));
        let api: Api<DynamicObject> = if caps.scope == Scope::Namespaced {
            let ns = object
                .metadata
                .namespace
                .as_deref()
                .unwrap_or(RELEASE_NAMESPACE);
            Api::namespaced_with(client.clone(), ns, &resource)
        } else {
            Api::all_with(client.clone(), &resource)
        };
        let name = object.metadata.name.as_deref().expect("a name");
        let installed = api
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("{} {name} was not installed: {e}", gvk.kind));
        let mut manifest = serde_json::to_value(object).unwrap();
        manifest.as_object_mut().unwrap().remove("metadata");
        let mut installed = serde_json::to_value(installed).unwrap();
        if gvk.kind == "ClusterRole" && name == cluster::impersonable::GROUPS_ROLE {
            // The console adds the custom roles' groups after the chart's (other suites'
            // roles may exist now).
            let chart = &manifest["rules"][0]["resourceNames"];
            let names = installed["rules"][0]["resourceNames"]
                .as_array_mut()
                .unwrap();
            let len = chart.as_array().unwrap().len();
            assert!(names.len() >= len, "{name}: {names:?}");
            names.truncate(len);
        }
        if gvk.kind == "ClusterRole" && name == cluster::impersonable::USERS_ROLE {
            // The console lists its own users (whoever the suites made): console names.
            let names = installed["rules"][0]["resourceNames"]
                .as_array_mut()
                .unwrap();
            assert!(
                !names.is_empty()
                    && names
                        .iter()
                        .all(|n| n.as_str().is_some_and(|n| n.starts_with("console:"))),
                "{name}: {names:?}"
            );
            *names = manifest["rules"][0]["resourceNames"]
                .as_array()
                .unwrap()
                .clone();
        }
        if let Some(difference) = missing_from(&manifest, &installed) {
            panic!(
                "{} {name} is not as helm rendered it: {difference}",
                gvk.kind
            );
        }
        kinds.push(gvk.kind);
    }
    for kind in [
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ] {
        assert!(
            kinds.iter().any(|k| k == kind),
            "no {kind} installed: {kinds:?}"
        );
    }

    // Helm installed the CRDs (crds/) too, and the API server serves them.
    for plural in [
        "virtualmachinepools",
        "virtualmachines",
        "virtualmachineclaims",
    ] {
        assert!(
            discovery
                .groups()
                .flat_map(|g| g.recommended_resources())
                .any(|(r, _)| r.group == "banlieue.io" && r.plural == plural),
            "{plural}.banlieue.io is not served"
        );
    }
}

fn kind_of(object: &DynamicObject) -> String {
    object
        .types
        .as_ref()
        .map(|t| t.kind.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn the_in_process_install_applies_the_chart_but_its_workload() {
    use kube_emulator::{Emulator, EmulatorConfig};
    let rendered = chart::parse_documents(chart::RENDERED).unwrap();
    // The default values' workload (SQLite, one replica, no Ingress): left out.
    let workload: BTreeSet<String> = rendered
        .iter()
        .filter(|o| chart::is_workload(o))
        .map(kind_of)
        .collect();
    assert_eq!(
        workload,
        [
            "Deployment",
            "NetworkPolicy",
            "PersistentVolumeClaim",
            "Service"
        ]
        .map(String::from)
        .into(),
        "the committed rendering's workload"
    );
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let kubeconfig =
        kube::config::Kubeconfig::from_yaml(&emulator.kubeconfig_for(emulator.admin_token()))
            .unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    chart::install(
        &client,
        &ClaimSubjectPolicy::only_issuer("https://console.example.com"),
    )
    .await
    .expect("the chart installs on the emulator, without its workload");
    // Everything else is there, the console's ServiceAccount included.
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let mut installed = BTreeSet::new();
    for object in rendered.iter().filter(|o| !chart::is_workload(o)) {
        let gvk = GroupVersionKind::try_from(object.types.as_ref().unwrap()).unwrap();
        let (resource, caps) = discovery
            .resolve_gvk(&gvk)
            .unwrap_or_else(|| panic!("the emulator does not serve {gvk:?}"));
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => Api::namespaced_with(
                client.clone(),
                object.metadata.namespace.as_deref().unwrap(),
                &resource,
            ),
            Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        let name = object.metadata.name.as_deref().unwrap();
        api.get(name)
            .await
            .unwrap_or_else(|e| panic!("{} {name} was not installed: {e}", gvk.kind));
        installed.insert(gvk.kind);
    }
    assert!(installed.contains("ServiceAccount"), "{installed:?}");
    emulator.shutdown().await;
}

/// The example values files (`charts/banlieue-console/examples/*.yaml`), sorted.
fn examples() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(Path::new(CHART).join("examples"))
        .expect("charts/banlieue-console/examples")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 2, "{files:?}");
    files
}

fn yaml_file(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `over` merged into `base` as Helm merges a values file into the chart's values: maps
/// key by key, anything else replaced.
fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                match base.get_mut(&key) {
                    Some(existing) => merge(existing, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (base, over) => *base = over,
    }
}

/// The chart's values with `example` over them.
fn values_with(example: &Path) -> Value {
    let mut values = yaml_file(&Path::new(CHART).join("values.yaml"));
    merge(&mut values, yaml_file(example));
    values
}

/// A scalar value as the chart writes it into an environment variable.
fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// helm with `args` must fail: its stderr.
async fn helm_refuses(bed: &Testbed, args: &[&str]) -> String {
    let out = bed.helm().args(args).output().await.expect("helm runs");
    assert!(
        !out.status.success(),
        "helm {args:?} succeeded: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test]
async fn every_example_lints_and_the_api_server_accepts_what_it_renders() {
    let Some(bed) = testbed() else { return };
    let client = bed.admin_client().await;
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let ns = bed.namespace("chart-dry-run").await;
    let params = PatchParams::apply("banlieue-chart-dry-run")
        .force()
        .dry_run()
        .validation_strict();
    let mut kinds = BTreeSet::new();
    for example in examples() {
        let file = example.to_str().unwrap();
        bed.helm_ok(&["lint", "--strict", CHART, "-f", file]).await;
        let rendered = bed
            .helm_ok(&["template", "dry-run", CHART, "-n", &ns.name, "-f", file])
            .await;
        for object in chart::parse_documents(&rendered).unwrap() {
            let gvk = GroupVersionKind::try_from(object.types.as_ref().unwrap()).unwrap();
            let (resource, caps) = discovery
                .resolve_gvk(&gvk)
                .unwrap_or_else(|| panic!("{file}: the API server does not serve {gvk:?}"));
            let api: Api<DynamicObject> = match caps.scope {
                Scope::Namespaced => Api::namespaced_with(client.clone(), &ns.name, &resource),
                Scope::Cluster => Api::all_with(client.clone(), &resource),
            };
            let name = object.metadata.name.clone().unwrap();
            api.patch(&name, &params, &Patch::Apply(&object))
                .await
                .unwrap_or_else(|e| {
                    panic!("{file}: the API server refuses {} {name}: {e}", gvk.kind)
                });
            kinds.insert(gvk.kind);
        }
    }
    ns.delete().await;
    for kind in [
        "Deployment",
        "Service",
        "ServiceAccount",
        "PersistentVolumeClaim",
        "NetworkPolicy",
        "PodDisruptionBudget",
        "Ingress",
        "ConfigMap",
    ] {
        assert!(
            kinds.contains(kind),
            "no example renders a {kind}: {kinds:?}"
        );
    }
}

#[tokio::test]
async fn the_schema_refuses_bad_values() {
    let Some(bed) = testbed() else { return };
    // One case per rule of values.schema.json: the values given with --set, and where
    // helm must say the schema refused them.
    let cases: &[(&[&str], &str)] = &[
        (&["replicas=0"], "/replicas"),
        (&["image.repository="], "/image/repository"),
        (&["image.pullPolicy=Sometimes"], "/image/pullPolicy"),
        (&["externalURL="], "/externalURL"),
        (
            &["claimSubjectPolicy.usernamePrefix=acme:"],
            "'usernamePrefix' not allowed",
        ),
        (&["database.type=mysql"], "/database/type"),
        (&["database.sqlite.size=lots"], "/database/sqlite/size"),
        (
            &["database.postgres.urlSecret.key="],
            "/database/postgres/urlSecret/key",
        ),
        (&["keyEncryption.key="], "/keyEncryption/key"),
        (
            &["keyEncryption.previousKey="],
            "/keyEncryption/previousKey",
        ),
        (&["tokens.idTokenTTLMinutes=0"], "/tokens/idTokenTTLMinutes"),
        (
            &["tokens.idTokenTTLMinutes=16"],
            "/tokens/idTokenTTLMinutes",
        ),
        (
            &["tokens.refreshTokenLifetimeHours=721"],
            "/tokens/refreshTokenLifetimeHours",
        ),
        (
            &["tokens.sessionLifetimeHours=0"],
            "/tokens/sessionLifetimeHours",
        ),
        (
            &["tokens.signingKeyActivationMinutes=1441"],
            "/tokens/signingKeyActivationMinutes",
        ),
        (&["kubeconfig.server=k8s.example.org"], "/kubeconfig/server"),
        (
            &[
                "kubeconfig.server=https://k8s.example.org",
                "kubeconfig.certificateAuthority=ca",
            ],
            "/kubeconfig/certificateAuthority",
        ),
        (&["kubeconfig.clusterName= "], "/kubeconfig/clusterName"),
        (&["runControllers=sometimes"], "/runControllers"),
        (&["tenants.enabled=sometimes"], "/tenants/enabled"),
        (&["tenants.refreshSeconds=4"], "/tenants/refreshSeconds"),
        (&["tenants.refreshSeconds=3601"], "/tenants/refreshSeconds"),
        (
            &["tenants.enabled=true", "tenants.items[0].tenantId=acme"],
            "/tenants/items/0",
        ),
        (
            &[
                "tenants.enabled=true",
                "tenants.items[0].tenantId=Acme",
                "tenants.items[0].oidc.issuer=https://idp.example",
                "tenants.items[0].oidc.tenantClaim=t",
                "tenants.items[0].oidc.usernameClaim=sub",
                "tenants.items[0].oidc.rolesClaim=r",
                "tenants.items[0].defaultRole=viewer",
                "tenants.items[0].allowedRoles[0]=viewer",
                "tenants.items[0].namespaces[0]=acme",
            ],
            "/tenants/items/0/tenantId",
        ),
        (
            &["simulatedProvider.enabled=sometimes"],
            "/simulatedProvider/enabled",
        ),
        (&["shutdownDelaySeconds=61"], "/shutdownDelaySeconds"),
        // A null removes the key, which the templates would then render as nothing.
        (
            &["claimTTLChoices=null"],
            "missing property 'claimTTLChoices'",
        ),
        (&["containerPort=null"], "missing property 'containerPort'"),
        (&["metricsPort=null"], "missing property 'metricsPort'"),
        (
            &["service.annotations=null"],
            "missing property 'annotations'",
        ),
        (&["claimTTLChoices={}"], "/claimTTLChoices"),
        (&["claimTTLChoices={0}"], "/claimTTLChoices/0"),
        // A claim may ask for 30 days at most.
        (&["claimTTLChoices={900,2592001}"], "/claimTTLChoices/1"),
        (
            &["trustedProxies={}", "trustedProxies[0]="],
            "/trustedProxies/0",
        ),
        (&["trustedProxies={proxy.example.com}"], "/trustedProxies/0"),
        (&["log.format=xml"], "/log/format"),
        (&["containerPort=70000"], "/containerPort"),
        (&["metricsPort=0"], "/metricsPort"),
        (
            &["networkPolicy.metricsFrom={a}"],
            "/networkPolicy/metricsFrom/0",
        ),
        (&["service.port=0"], "/service/port"),
        (&["service.type=External"], "/service/type"),
        (&["ingress.annotations.a=1"], "/ingress/annotations/a"),
        (
            &["networkPolicy.apiServer.ports={}"],
            "/networkPolicy/apiServer/ports",
        ),
        (
            &["networkPolicy.postgres.port=0"],
            "/networkPolicy/postgres/port",
        ),
        (&["networkPolicy.dns.port=65536"], "/networkPolicy/dns/port"),
        (
            &["networkPolicy.ingressFrom={a}"],
            "/networkPolicy/ingressFrom/0",
        ),
        (&["resources.request.cpu=1"], "'request' not allowed"),
        (
            &["podSecurityContext.runAsUser=0"],
            "/podSecurityContext/runAsUser",
        ),
        // 0 would be dropped by the templates' `with`, and is the root group anyway.
        (
            &["podSecurityContext.runAsGroup=0"],
            "/podSecurityContext/runAsGroup",
        ),
        (
            &["podSecurityContext.fsGroup=0"],
            "/podSecurityContext/fsGroup",
        ),
        (&["claimSubjectPolicy.issuer=x"], "'issuer' not allowed"),
        (
            &["claimSubjectPolicy.brokers=1"],
            "/claimSubjectPolicy/brokers",
        ),
        (&["replica=2"], "'replica' not allowed"),
        // What the API server would refuse after Helm applied the rest.
        (&["ingress.className=Nginx"], "/ingress/className"),
        (&["ingress.tlsSecretName=Web_TLS"], "/ingress/tlsSecretName"),
        (
            &["database.sqlite.storageClassName=Fast_SSD"],
            "/database/sqlite/storageClassName",
        ),
        (&["database.sqlite.size=lots"], "/database/sqlite/size"),
        (&["tls.secretName=My_Secret"], "/tls/secretName"),
        (&["keyEncryption.key=a/b"], "/keyEncryption/key"),
        (
            &["database.postgres.urlSecret.key=url?"],
            "/database/postgres/urlSecret/key",
        ),
        (
            &["resources.limits.memory=lots"],
            "/resources/limits/memory",
        ),
        (
            &["service.externalTrafficPolicy=Nearest"],
            "/service/externalTrafficPolicy",
        ),
        (&["resources.limits.foo=1"], "'foo' not allowed"),
        (
            &["resources.requests.hugepages-2Mi=1Gi"],
            "'hugepages-2Mi' not allowed",
        ),
        (&["database.sqlite.size=0"], "/database/sqlite/size"),
        // A fraction of a byte.
        (&["database.sqlite.size=1m"], "/database/sqlite/size"),
        (
            &["podSecurityContext.runAsUser=3000000000"],
            "/podSecurityContext/runAsUser",
        ),
        (&["replicas=3000000000"], "/replicas"),
        (
            &["database.postgres.urlSecret.key=..foo"],
            "/database/postgres/urlSecret/key",
        ),
        (
            &["image.repository=registry.example.org/x y"],
            "/image/repository",
        ),
        (&["image.tag=1.0 "], "/image/tag"),
    ];
    // Values `--set` cannot give (an empty list), as JSON.
    let json_cases: &[(&[&str], &str)] = &[
        // Empty would open the metrics port to every address.
        (
            &["networkPolicy.metricsFrom=[]"],
            "at '/networkPolicy/metricsFrom': minItems: got 0, want 1",
        ),
        (
            &["trustedProxies=[\"10.0.0.1\", \"\"]"],
            "/trustedProxies/1",
        ),
        // The console would refuse these at start.
        (&["trustedProxies=[\"999.1.1.1\"]"], "/trustedProxies/0"),
        (&["trustedProxies=[\"10.0.0.0/99\"]"], "/trustedProxies/0"),
        // An empty peer, or an ipBlock beside a selector, the API server refuses.
        (
            &["networkPolicy.metricsFrom=[{}]"],
            "/networkPolicy/metricsFrom/0",
        ),
        (
            &[
                "networkPolicy.ingressFrom=[{\"ipBlock\": {\"cidr\": \"10.0.0.0/8\"}, \"podSelector\": {}}]",
            ],
            "/networkPolicy/ingressFrom/0",
        ),
        (
            &["networkPolicy.dns.to=[{\"ipBlock\": {\"cidr\": \"10.0.0.0/40\"}}]"],
            "/networkPolicy/dns/to/0/ipBlock/cidr",
        ),
        // A key's error names its map's path, not the document's root.
        (
            &["ingress.annotations={\"bad key!\": \"x\"}"],
            "at '/ingress/annotations': additional properties 'bad key!' not allowed",
        ),
        (
            &["service.annotations={\"a/b/c\": \"x\"}"],
            "at '/service/annotations': additional properties 'a/b/c' not allowed",
        ),
        (
            &["podAnnotations={\"example.com/\": \"x\"}"],
            "at '/podAnnotations': additional properties 'example.com/' not allowed",
        ),
        (
            &["imagePullSecrets=[{\"name\": \"Registry\"}]"],
            "/imagePullSecrets/0/name",
        ),
        (
            &["nodeSelector={\"zone\": \"not a label value\"}"],
            "/nodeSelector/zone",
        ),
        (
            &["tolerations=[{\"key\": \"a\", \"operator\": \"Exists\", \"value\": \"x\"}]"],
            "/tolerations/0",
        ),
        (
            &["tolerations=[{\"key\": \"a\", \"effect\": \"Sometimes\"}]"],
            "/tolerations/0/effect",
        ),
        // tolerationSeconds needs NoExecute; no key needs Exists.
        (
            &[
                "tolerations=[{\"key\": \"a\", \"operator\": \"Exists\", \"effect\": \"NoSchedule\", \"tolerationSeconds\": 10}]",
            ],
            "/tolerations/0",
        ),
        (
            &["tolerations=[{\"operator\": \"Equal\", \"value\": \"x\"}]"],
            "/tolerations/0",
        ),
        (
            &["networkPolicy.ingressFrom=[{\"ipBlock\": {\"cidr\": \"1:::::2/64\"}}]"],
            "/networkPolicy/ingressFrom/0/ipBlock/cidr",
        ),
        (
            &[
                "networkPolicy.ingressFrom=[{\"podSelector\": {\"matchExpressions\": [{\"key\": \"a\", \"operator\": \"In\"}]}}]",
            ],
            "/networkPolicy/ingressFrom/0/podSelector/matchExpressions/0",
        ),
        (&["trustedProxies=[\"1::2::3\"]"], "/trustedProxies/0"),
    ];
    let given = cases
        .iter()
        .map(|case| ("--set", case))
        .chain(json_cases.iter().map(|case| ("--set-json", case)));
    for (flag, (set, pointer)) in given {
        let mut args = vec!["template", "schema", CHART];
        for s in *set {
            args.extend([flag, s]);
        }
        let stderr = helm_refuses(&bed, &args).await;
        assert!(
            stderr.contains("values don't meet the specifications of the schema")
                && stderr.contains(pointer),
            "{set:?}: expected a schema refusal at {pointer}, helm said: {stderr}"
        );
    }
    // Rules of several keys, or whose reason a schema cannot give: the templates refuse
    // them, saying why.
    let refused: &[(&[&str], &str)] = &[
        (
            &["externalURL=https://console.example.com/console"],
            "externalURL is \"https://console.example.com/console\": it must be https:// and a host (and port) only",
        ),
        (
            &["externalURL=ftp://console.example.com"],
            "it must be https://",
        ),
        // kube-apiserver takes only an https issuer: NOTES' configuration would stop it.
        (
            &["externalURL=http://console.example.com"],
            "kube-apiserver takes only an https issuer",
        ),
        (
            &["database.type=postgres", "keyEncryption.secretName=kek"],
            "database.type is postgres: set database.postgres.urlSecret.name",
        ),
        (
            &[
                "database.type=postgres",
                "database.postgres.urlSecret.name=pg",
            ],
            "database.type is postgres: set keyEncryption.secretName",
        ),
        (
            &["kubeconfig.certificateAuthority=-----BEGIN CERTIFICATE-----"],
            "kubeconfig.certificateAuthority is set without kubeconfig.server",
        ),
        // A placeholder or a certificate cut short, which the console would refuse at start.
        (
            &[
                "kubeconfig.server=https://k8s.example.org",
                "kubeconfig.certificateAuthority=-----BEGIN CERTIFICATE-----\nMIIBjjCCATWgAwIBAgIUN4MhYapiY22d4lgJIuaHFbLewEMwCgYIKoZIzj0EAwIw\n-----END CERTIFICATE-----\n",
            ],
            "certificate 1 is not a whole DER certificate (48 bytes",
        ),
        (
            &[
                "kubeconfig.server=https://k8s.example.org",
                "kubeconfig.certificateAuthority=-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----",
            ],
            "certificate 1 is not base64",
        ),
        (
            &[
                "kubeconfig.server=https://k8s.example.org",
                "kubeconfig.certificateAuthority=-----BEGIN CERTIFICATE----- (paste it here)",
            ],
            "holds no PEM certificate",
        ),
        (
            &["simulatedProvider.enabled=true", "runControllers=false"],
            "simulatedProvider.enabled needs runControllers",
        ),
        (
            &["kubeconfig.server=http://k8s.example.org:6443"],
            "so it must be https://",
        ),
        (
            &[
                "service.type=LoadBalancer",
                "service.loadBalancerSourceRanges[0]=10.0.0.1/8",
            ],
            "service.loadBalancerSourceRanges: 10.0.0.1/8 has bits set past its /8 prefix",
        ),
        (
            &["claimSubjectPolicy.issuerPrefixes=https://console.example.com=corp:"],
            "https://console.example.com is this console's own issuer",
        ),
        (
            &[
                "ingress.enabled=true",
                "externalURL=https://console.example.com:8443",
            ],
            "which must then have no port",
        ),
        (
            &[
                "ingress.enabled=true",
                "externalURL=https://Console.example.com",
            ],
            "(Console.example.com), which must then be a lower-case DNS name",
        ),
        (
            &["ingress.enabled=true", "externalURL=https://192.0.2.7"],
            "not an IP address",
        ),
        // Hosts and ports the console could not parse, and a range it would refuse.
        (
            &["externalURL=https://:443"],
            "after the scheme comes a host",
        ),
        (
            &["externalURL=https://console.example.com:70000"],
            "port 70000 is not from 1 to 65535",
        ),
        (
            &["externalURL=https://999.1.1.1"],
            "999.1.1.1 is not an IPv4 address",
        ),
        (
            &["kubeconfig.server=https://k8s.example.com:99999"],
            "kubeconfig.server is \"https://k8s.example.com:99999\": port 99999",
        ),
        (
            &["trustedProxies={192.168.5.0/22}"],
            "write the range as 192.168.4.0/22, or the one address as 192.168.5.0/32",
        ),
        (
            &["externalURL=https://console.123"],
            "console.123 is not an IPv4 address",
        ),
        (&["externalURL=https://[1]"], "[1] is not an IPv6 address"),
        (
            &["claimSubjectPolicy.issuerPrefixes=https://dex.example.com=system:"],
            "https://dex.example.com's prefix system: is reserved",
        ),
        (
            &["claimSubjectPolicy.issuerPrefixes=https://dex.example.com="],
            "https://dex.example.com has an empty prefix",
        ),
        (
            &["claimSubjectPolicy.issuerPrefixes=https://dex.example.com"],
            "\"https://dex.example.com\" is not <issuer>=<prefix>",
        ),
        (
            &["service.externalTrafficPolicy=Local"],
            "service.type is ClusterIP, which has none",
        ),
        (
            &[
                "resources.requests.memory=1Gi",
                "resources.limits.memory=512Mi",
            ],
            "the memory request (1Gi) is above its limit (512Mi)",
        ),
        (
            &[
                "networkPolicy.ingressFrom[0].ipBlock.cidr=10.0.0.0/8",
                "networkPolicy.ingressFrom[0].ipBlock.except[0]=192.168.0.0/16",
            ],
            "the except range 192.168.0.0/16 is not strictly inside its cidr 10.0.0.0/8",
        ),
        (
            &["networkPolicy.dns.to[0].ipBlock.cidr=10.0.0.1/8"],
            "networkPolicy.dns.to: 10.0.0.1/8 has bits set past its /8 prefix",
        ),
        (
            &["networkPolicy.metricsFrom[0].ipBlock.cidr=0.0.0.0/0"],
            "0.0.0.0/0 is wider than a /8",
        ),
        (
            // Two halves of every address, each short of /0.
            &[
                "networkPolicy.metricsFrom[0].ipBlock.cidr=10.0.0.0/8",
                "networkPolicy.metricsFrom[1].ipBlock.cidr=0.0.0.0/1",
                "networkPolicy.metricsFrom[2].ipBlock.cidr=128.0.0.0/1",
            ],
            "0.0.0.0/1 is wider than a /8",
        ),
        (
            &["networkPolicy.metricsFrom[0].ipBlock.cidr=::/1"],
            "::/1 is wider than a /8",
        ),
        (
            &[
                "resources.requests.memory=16Mi",
                "resources.limits.memory=16Mi",
            ],
            "give the console at least 128Mi",
        ),
        (
            &["service.loadBalancerSourceRanges[0]=203.0.113.0/24"],
            "service.type is not LoadBalancer",
        ),
    ];
    for (set, reason) in refused {
        let mut args = vec!["template", "templates", CHART];
        for s in *set {
            args.extend(["--set", s]);
        }
        let stderr = helm_refuses(&bed, &args).await;
        assert!(
            stderr.contains("execution error") && stderr.contains(reason),
            "{set:?}: expected the templates to refuse with {reason:?}, helm said: {stderr}"
        );
    }
}

#[tokio::test]
async fn the_simulated_providers_rights_come_only_with_it() {
    let Some(bed) = testbed() else { return };
    // What the console's ServiceAccount may write beyond claims, VMs and its Lease, and
    // the admission policies holding those writes to the simulator's names.
    let rights = |yaml: &str| -> BTreeSet<String> {
        let mut found = BTreeSet::new();
        for object in chart::parse_documents(yaml).unwrap() {
            let name = object.metadata.name.clone().unwrap_or_default();
            match kind_of(&object).as_str() {
                "ValidatingAdmissionPolicy" if name.starts_with("banlieue-console-") => {
                    found.insert(format!("policy {name}"));
                }
                "ClusterRole" if name.starts_with("banlieue-console-") => {
                    for rule in object.data["rules"].as_array().unwrap() {
                        let verbs = rule["verbs"].as_array().unwrap();
                        for resource in rule["resources"].as_array().unwrap() {
                            let resource = resource.as_str().unwrap();
                            if ["secrets", "virtualmachineproviders"].contains(&resource) {
                                for verb in verbs {
                                    found.insert(format!("{resource} {}", verb.as_str().unwrap()));
                                }
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        found
    };
    let read_only = ["get", "list", "watch"].map(|v| format!("virtualmachineproviders {v}"));
    let policies = ["banlieue-console-providers", "banlieue-console-secrets"]
        .map(|name| format!("policy {name}"));
    let without = rights(&bed.helm_ok(&["template", "sim", CHART]).await);
    let impersonation = without
        .iter()
        .filter(|r| r.starts_with("policy"))
        .cloned()
        .collect::<BTreeSet<_>>();
    assert!(
        impersonation.is_disjoint(&policies.iter().cloned().collect()),
        "{impersonation:?}"
    );
    assert_eq!(
        without
            .iter()
            .filter(|r| !r.starts_with("policy"))
            .cloned()
            .collect::<BTreeSet<_>>(),
        read_only.iter().cloned().collect(),
        "off, the ServiceAccount only reads providers and touches no Secret"
    );
    let with = rights(
        &bed.helm_ok(&[
            "template",
            "sim",
            CHART,
            "--set",
            "simulatedProvider.enabled=true",
        ])
        .await,
    );
    let mut expected = without.clone();
    expected.extend(policies);
    expected.extend(
        [
            "virtualmachineproviders create",
            "virtualmachineproviders update",
            "virtualmachineproviders patch",
            "secrets get",
            "secrets create",
        ]
        .map(String::from),
    );
    assert_eq!(with, expected);
}

#[tokio::test]
async fn a_digest_alone_pins_the_image() {
    let Some(bed) = testbed() else { return };
    let digest = format!("@sha256:{}", "a".repeat(64));
    let rendered = bed
        .helm_ok(&[
            "template",
            "digest",
            CHART,
            "--set-string",
            &format!("image.tag={digest}"),
        ])
        .await;
    assert!(
        rendered.contains(&format!("image: \"banlieue-console{digest}\"")),
        "{rendered}"
    );
}

#[tokio::test]
async fn an_upgrade_may_not_shrink_or_move_the_kept_sqlite_claim() {
    let Some(bed) = testbed() else { return };
    let ns = bed.namespace("chart-claim").await;
    let claims: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
        Api::namespaced(bed.admin_client().await, &ns.name);
    let claim = json!({
        "metadata": {"name": "banlieue-console-data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}},
    });
    claims
        .create(&Default::default(), &serde_json::from_value(claim).unwrap())
        .await
        .unwrap();
    // Rendered against the cluster (`lookup` sees the claim), as an upgrade renders.
    let render = |set: &'static str| {
        [
            "template",
            "kept",
            CHART,
            "-n",
            &ns.name,
            "--dry-run=server",
            "--set",
            set,
        ]
        .map(str::to_owned)
    };
    for (set, reason) in [
        (
            "database.sqlite.size=1Gi",
            "a claim cannot shrink; set 2Gi or more",
        ),
        (
            "database.sqlite.size=3Gi",
            "does not allow volume expansion: keep 2Gi",
        ),
        (
            "database.sqlite.storageClassName=fast",
            "a claim's class cannot change",
        ),
    ] {
        let args = render(set);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let stderr = helm_refuses(&bed, &args).await;
        assert!(stderr.contains(reason), "{set}: {stderr}");
    }
    let args = render("database.sqlite.size=2Gi");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    bed.helm_ok(&args).await;
    ns.delete().await;
}

#[tokio::test]
async fn sqlite_with_more_than_one_replica_is_refused() {
    let Some(bed) = testbed() else { return };
    // By the templates, which say why.
    let stderr = helm_refuses(&bed, &["template", "two", CHART, "--set", "replicas=2"]).await;
    assert!(
        stderr
            .contains("replicas is 2 but database.type is sqlite: one process owns a SQLite file"),
        "{stderr}"
    );
    // Two replicas on PostgreSQL are fine, with a PodDisruptionBudget; one has none.
    let postgres = [
        "replicas=2",
        "database.type=postgres",
        "database.postgres.urlSecret.name=pg",
        "keyEncryption.secretName=kek",
    ];
    let mut args = vec!["template", "two", CHART];
    for s in &postgres {
        args.extend(["--set", s]);
    }
    let kinds = |yaml: &str| -> Vec<String> {
        chart::parse_documents(yaml)
            .unwrap()
            .iter()
            .map(kind_of)
            .collect()
    };
    assert!(kinds(&bed.helm_ok(&args).await).contains(&"PodDisruptionBudget".into()));
    let one = bed.helm_ok(&["template", "one", CHART]).await;
    assert!(!kinds(&one).contains(&"PodDisruptionBudget".into()));
}

#[tokio::test]
async fn the_metrics_port_is_its_own_and_only_the_cluster_reaches_it() {
    let Some(bed) = testbed() else { return };
    let rendered = bed.helm_ok(&["template", "metrics", CHART]).await;
    let objects = chart::parse_documents(&rendered).unwrap();
    let object = |kind: &str| -> Value {
        let found = objects.iter().find(|o| kind_of(o) == kind);
        serde_json::to_value(found.unwrap_or_else(|| panic!("no {kind}"))).unwrap()
    };
    assert_eq!(
        object("NetworkPolicy")["spec"]["ingress"],
        json!([
            {"ports": [{"port": "http", "protocol": "TCP"}]},
            {"ports": [{"port": "metrics", "protocol": "TCP"}], "from": [{"namespaceSelector": {}}]},
        ]),
        "the console's port from anywhere, the metrics port from the cluster's pods only"
    );
    // Never on the Service people reach, which a LoadBalancer exposes whole.
    let exposed = bed
        .helm_ok(&[
            "template",
            "metrics",
            CHART,
            "--set",
            "service.type=LoadBalancer",
        ])
        .await;
    let services: BTreeMap<String, Value> = chart::parse_documents(&exposed)
        .unwrap()
        .into_iter()
        .filter(|o| kind_of(o) == "Service")
        .map(|o| {
            (
                o.metadata.name.clone().unwrap(),
                serde_json::to_value(o).unwrap(),
            )
        })
        .collect();
    let ports = |name: &str| -> Vec<(String, Value)> {
        let ports = services[name]["spec"]["ports"].as_array().unwrap();
        ports
            .iter()
            .map(|p| (text(&p["name"]), p["port"].clone()))
            .collect()
    };
    assert_eq!(ports("banlieue-console"), [("http".to_owned(), json!(80))]);
    assert_eq!(services["banlieue-console"]["spec"]["type"], "LoadBalancer");
    assert_eq!(
        ports("banlieue-console-metrics"),
        [("metrics".to_owned(), json!(9464))]
    );
    assert_eq!(
        services["banlieue-console-metrics"]["spec"]["type"],
        "ClusterIP"
    );

    let stderr = helm_refuses(
        &bed,
        &["template", "same", CHART, "--set", "metricsPort=3000"],
    )
    .await;
    assert!(
        stderr.contains("metricsPort and containerPort are both 3000"),
        "{stderr}"
    );
    let stderr = helm_refuses(
        &bed,
        &["template", "same", CHART, "--set", "service.port=9464"],
    )
    .await;
    assert!(
        stderr.contains("service.port and metricsPort are both 9464"),
        "{stderr}"
    );
}

/// What the values say the console's environment is, by variable: `{"value": …}` or
/// `{"valueFrom": …}` (README, "Configuration").
fn expected_env(values: &Value, namespace: &str) -> BTreeMap<String, Value> {
    let mut env = BTreeMap::new();
    let mut set = |name: &str, value: Value| {
        env.insert(name.to_owned(), value);
    };
    let plain = |v: String| json!({ "value": v });
    set(
        "BANLIEUE_LISTEN",
        plain(format!("0.0.0.0:{}", values["containerPort"])),
    );
    set(
        "BANLIEUE_METRICS_LISTEN",
        plain(format!("0.0.0.0:{}", values["metricsPort"])),
    );
    set("BANLIEUE_EXTERNAL_URL", plain(text(&values["externalURL"])));
    // SQLite's URL is an argument (`helm_install_runs_the_console_as_the_values_say`).
    if values["database"]["type"] != "sqlite" {
        let secret = &values["database"]["postgres"]["urlSecret"];
        set(
            "BANLIEUE_DATABASE_URL",
            json!({"valueFrom": {"secretKeyRef": {"name": secret["name"], "key": secret["key"]}}}),
        );
    }
    if values["keyEncryption"]["secretName"] != "" {
        set(
            "BANLIEUE_KEY_ENCRYPTION_KEY_FILE",
            plain("/etc/banlieue-console/key-encryption/current".into()),
        );
    }
    if values["keyEncryption"]["previousSecretName"] != "" {
        set(
            "BANLIEUE_PREVIOUS_KEY_ENCRYPTION_KEY_FILE",
            plain("/etc/banlieue-console/key-encryption-previous/previous".into()),
        );
    }
    if values["tls"]["secretName"] != "" {
        set(
            "BANLIEUE_TLS_CERT_FILE",
            plain("/etc/banlieue-console/tls/tls.crt".into()),
        );
        set(
            "BANLIEUE_TLS_KEY_FILE",
            plain("/etc/banlieue-console/tls/tls.key".into()),
        );
    }
    if values["tenants"]["enabled"] == true {
        set("BANLIEUE_TENANTS_SOURCE", plain("kubernetes".into()));
        set(
            "BANLIEUE_TENANTS_REFRESH",
            plain(text(&values["tenants"]["refreshSeconds"])),
        );
    }
    let tokens = &values["tokens"];
    for (name, key) in [
        ("BANLIEUE_ID_TOKEN_TTL_MINUTES", "idTokenTTLMinutes"),
        (
            "BANLIEUE_REFRESH_TOKEN_LIFETIME_HOURS",
            "refreshTokenLifetimeHours",
        ),
        ("BANLIEUE_SESSION_LIFETIME_HOURS", "sessionLifetimeHours"),
        (
            "BANLIEUE_SIGNING_KEY_ACTIVATION_MINUTES",
            "signingKeyActivationMinutes",
        ),
    ] {
        set(name, plain(text(&tokens[key])));
    }
    let kubeconfig = &values["kubeconfig"];
    if kubeconfig["server"] != "" {
        set(
            "BANLIEUE_CLUSTER_SERVER",
            plain(text(&kubeconfig["server"])),
        );
    }
    if kubeconfig["certificateAuthority"] != "" {
        set(
            "BANLIEUE_CLUSTER_CA_FILE",
            plain("/etc/banlieue-console/cluster-ca/ca.crt".into()),
        );
    }
    set(
        "BANLIEUE_CLUSTER_NAME",
        plain(text(&kubeconfig["clusterName"])),
    );
    set("BANLIEUE_NAMESPACE", plain(namespace.into()));
    set(
        "BANLIEUE_RUN_CONTROLLERS",
        plain(text(&values["runControllers"])),
    );
    if values["simulatedProvider"]["enabled"] == true {
        set("BANLIEUE_SIMULATED_PROVIDER", plain("true".into()));
    }
    set(
        "BANLIEUE_SHUTDOWN_DELAY_SECONDS",
        plain(text(&values["shutdownDelaySeconds"])),
    );
    let joined = |list: &Value| -> String {
        list.as_array()
            .unwrap()
            .iter()
            .map(text)
            .collect::<Vec<_>>()
            .join(",")
    };
    set(
        "BANLIEUE_CLAIM_TTL_CHOICES",
        plain(joined(&values["claimTTLChoices"])),
    );
    if !values["trustedProxies"].as_array().unwrap().is_empty() {
        set(
            "BANLIEUE_TRUSTED_PROXIES",
            plain(joined(&values["trustedProxies"])),
        );
    }
    set("BANLIEUE_LOG_FORMAT", plain(text(&values["log"]["format"])));
    if values["log"]["filter"] != "" {
        set("RUST_LOG", plain(text(&values["log"]["filter"])));
    }
    if values["leptos"]["siteRoot"] != "" {
        set(
            "LEPTOS_SITE_ROOT",
            plain(text(&values["leptos"]["siteRoot"])),
        );
    }
    env
}

/// A helm post-renderer that keeps the namespaced objects only: the test bed's own
/// release (`banlieue`) holds the chart's cluster-wide objects (fixed names: the console
/// looks them up by name), which a second release could not own.
fn namespaced_only(bed: &Testbed, release: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = bed.dir().join(format!("{release}-post-renderer.sh"));
    std::fs::write(
        &path,
        "#!/bin/sh\nexec awk 'BEGIN { RS = \"\\n---\"; ORS = \"\" } NR == 1 { sub(/^---/, \"\") } \
         !/\\nkind: (ClusterRole|ClusterRoleBinding|ValidatingAdmissionPolicy|ValidatingAdmissionPolicyBinding)\\n/ \
         { print \"\\n---\" $0 } END { print \"\\n\" }'\n",
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[tokio::test]
async fn upgrades_and_rollbacks_between_sqlite_and_postgres_go_through() {
    let Some(bed) = testbed() else { return };
    let client = bed.admin_client().await;
    let ns = bed.namespace("chart-switch").await;
    let release = unique_name("switch");
    let post_renderer = namespaced_only(&bed, &release);
    let post_renderer = post_renderer.to_str().unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let claims: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
        Api::namespaced(client.clone(), &ns.name);
    // What each database type makes of the Deployment: whether the SQLite volume is
    // mounted, and whether the database URL comes from the PostgreSQL Secret.
    let runs = || async {
        let deployment = deployments.get("banlieue-console").await.unwrap();
        let container = &deployment.spec.template.spec.unwrap().containers[0];
        let from_secret = container
            .env
            .iter()
            .flatten()
            .filter(|v| v.name == "BANLIEUE_DATABASE_URL")
            .map(|v| v.value.is_none() && v.value_from.is_some())
            .collect::<Vec<_>>();
        let mounts_data = container
            .volume_mounts
            .iter()
            .flatten()
            .any(|m| m.name == "data");
        (mounts_data, from_secret)
    };
    let sqlite = (true, Vec::new());
    let postgres = (false, vec![true]);
    let to_postgres = [
        "--reuse-values",
        "--set",
        "database.type=postgres",
        "--set",
        "database.postgres.urlSecret.name=database",
        "--set",
        "keyEncryption.secretName=kek",
        "--set",
        "replicas=2",
    ];
    let namespace = ns.name.clone();
    let helm = |args: &[&str]| -> Vec<String> {
        let mut all: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        all.extend(["-n".to_owned(), namespace.clone()]);
        all
    };
    let bed = &bed;
    let run = |args: Vec<String>| async move {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        bed.helm_ok(&args).await;
    };
    run(helm(&[
        "install",
        &release,
        CHART,
        "--post-renderer",
        post_renderer,
    ]))
    .await;
    assert_eq!(runs().await, sqlite);
    let mut upgrade = vec!["upgrade", &release, CHART, "--post-renderer", post_renderer];
    upgrade.extend(to_postgres);
    run(helm(&upgrade)).await;
    assert_eq!(runs().await, postgres);
    // Back to SQLite: the kept claim is still the release's, and no variable is left
    // holding both a value and a source.
    run(helm(&["rollback", &release])).await;
    assert_eq!(runs().await, sqlite);
    run(helm(&upgrade)).await;
    assert_eq!(runs().await, postgres);
    run(helm(&["rollback", &release, "1"])).await;
    assert_eq!(runs().await, sqlite);
    assert!(claims.get("banlieue-console-data").await.is_ok());
    run(helm(&["uninstall", &release])).await;
}

#[tokio::test]
async fn helm_install_runs_the_console_as_the_values_say() {
    let Some(bed) = testbed() else { return };
    let client = bed.admin_client().await;
    let chart_yaml = yaml_file(&Path::new(CHART).join("Chart.yaml"));
    // The test bed's AuthenticationConfiguration is SPEC §4's; NOTES.txt must print it.
    let mut spec_auth: Value = serde_yaml::from_str(
        &std::fs::read_to_string(bed.dir().join("authentication.yaml")).unwrap(),
    )
    .unwrap();
    spec_auth["jwt"][0]["issuer"]
        .as_object_mut()
        .unwrap()
        .remove("certificateAuthority");
    for example in examples() {
        let file = example.to_str().unwrap();
        let values = values_with(&example);
        let ns = bed.namespace("chart-install").await;
        let release = unique_name("console");
        let post_renderer = namespaced_only(&bed, &release);
        bed.helm_ok(&[
            "install",
            &release,
            CHART,
            "-n",
            &ns.name,
            "-f",
            file,
            "--post-renderer",
            post_renderer.to_str().unwrap(),
        ])
        .await;

        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
        let deployment = deployments.get("banlieue-console").await.unwrap();
        let spec = &deployment.spec;
        assert_eq!(
            Value::from(spec.replicas.unwrap()),
            values["replicas"],
            "{file}"
        );
        let pod = spec.template.spec.as_ref().unwrap();
        assert_eq!(
            pod.service_account_name.as_deref(),
            Some("banlieue-console")
        );
        assert_eq!(
            Value::from(pod.termination_grace_period_seconds.unwrap()),
            Value::from(values["shutdownDelaySeconds"].as_i64().unwrap() + 25),
            "{file}: the shutdown delay, then the requests in flight and the Lease"
        );
        let [container] = pod.containers.as_slice() else {
            panic!("{file}: one container");
        };
        let tag = match text(&values["image"]["tag"]) {
            t if t.is_empty() => text(&chart_yaml["appVersion"]),
            t => t,
        };
        assert_eq!(
            container.image.as_deref(),
            Some(format!("{}:{tag}", text(&values["image"]["repository"])).as_str()),
            "{file}"
        );
        assert_eq!(
            container.image_pull_policy.as_deref(),
            Some(text(&values["image"]["pullPolicy"]).as_str())
        );
        assert_eq!(
            container.args.clone().unwrap_or_default(),
            ["serve"],
            "{file}"
        );
        // SQLite's file is the console's default (data/console.db) in this directory, for
        // `serve` and for an exec'd `banlieue-console admin …` alike.
        assert_eq!(
            container.working_dir.as_deref(),
            Some("/var/lib/banlieue-console"),
            "{file}"
        );
        let data = container
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.name == "data")
            .map(|m| m.mount_path.as_str());
        let sqlite = values["database"]["type"] == "sqlite";
        assert_eq!(
            data,
            sqlite.then_some("/var/lib/banlieue-console/data"),
            "{file}"
        );
        let port_name = if values["tls"]["secretName"] == "" {
            "http"
        } else {
            "https"
        };
        let ports: Vec<(Option<&str>, Value)> = container
            .ports
            .iter()
            .flatten()
            .map(|port| (port.name.as_deref(), Value::from(port.container_port)))
            .collect();
        assert_eq!(
            ports,
            [
                (Some(port_name), values["containerPort"].clone()),
                (Some("metrics"), values["metricsPort"].clone()),
            ],
            "{file}"
        );
        for (probe, path) in [
            (&container.startup_probe, "/healthz"),
            (&container.liveness_probe, "/healthz"),
            (&container.readiness_probe, "/readyz"),
        ] {
            let get = probe.as_ref().unwrap().http_get.as_ref().unwrap();
            assert_eq!(
                serde_json::to_value(get).unwrap(),
                json!({"path": path, "port": port_name, "scheme": port_name.to_uppercase()}),
                "{file}"
            );
        }
        let env: BTreeMap<String, Value> = container
            .env
            .iter()
            .flatten()
            .map(|e| {
                let mut value = serde_json::to_value(e).unwrap();
                value.as_object_mut().unwrap().remove("name");
                (e.name.clone(), value)
            })
            .collect();
        assert_eq!(env, expected_env(&values, &ns.name), "{file}");
        // The Secrets the values name are the ones mounted.
        let secrets: BTreeSet<String> = pod
            .volumes
            .iter()
            .flatten()
            .filter_map(|v| v.secret.as_ref()?.secret_name.clone())
            .collect();
        let named: BTreeSet<String> = [
            &values["keyEncryption"]["secretName"],
            &values["keyEncryption"]["previousSecretName"],
            &values["tls"]["secretName"],
        ]
        .into_iter()
        .map(text)
        .filter(|s| !s.is_empty())
        .collect();
        assert_eq!(secrets, named, "{file}");
        assert_eq!(
            serde_json::to_value(&container.resources).unwrap(),
            values["resources"],
            "{file}"
        );
        // Pulling and scheduling, as given (an empty list or map: none at all).
        let given = |value: &Value| match value {
            Value::Array(a) if a.is_empty() => Value::Null,
            Value::Object(o) if o.is_empty() => Value::Null,
            _ => value.clone(),
        };
        for (key, installed) in [
            (
                "imagePullSecrets",
                serde_json::to_value(&pod.image_pull_secrets),
            ),
            ("nodeSelector", serde_json::to_value(&pod.node_selector)),
            ("tolerations", serde_json::to_value(&pod.tolerations)),
        ] {
            assert_eq!(installed.unwrap(), given(&values[key]), "{file}: {key}");
        }
        let annotations = spec.template.metadata.as_ref().unwrap().annotations.clone();
        for (key, value) in values["podAnnotations"].as_object().unwrap() {
            let installed = annotations.as_ref().and_then(|a| a.get(key));
            assert_eq!(
                installed.map(|v| Value::from(v.as_str())).as_ref(),
                Some(value),
                "{file}: {key}"
            );
        }

        // The rest of the workload, as the values say.
        let kinds = bed
            .helm_ok(&["get", "manifest", &release, "-n", &ns.name])
            .await;
        let kinds: BTreeSet<String> = chart::parse_documents(&kinds)
            .unwrap()
            .iter()
            .map(kind_of)
            .collect();
        let replicas = values["replicas"].as_u64().unwrap();
        for (kind, wanted) in [
            ("ServiceAccount", true),
            ("Service", true),
            ("NetworkPolicy", values["networkPolicy"]["enabled"] == true),
            ("PodDisruptionBudget", replicas > 1),
            ("Ingress", values["ingress"]["enabled"] == true),
            (
                "PersistentVolumeClaim",
                values["database"]["type"] == "sqlite",
            ),
        ] {
            assert_eq!(kinds.contains(kind), wanted, "{file}: {kind} in {kinds:?}");
        }
        let service = Api::<Service>::namespaced(client.clone(), &ns.name)
            .get("banlieue-console")
            .await
            .unwrap()
            .spec
            .unwrap();
        assert_eq!(
            Value::from(service.type_.unwrap()),
            values["service"]["type"],
            "{file}"
        );
        if values["service"]["externalTrafficPolicy"] != "" {
            assert_eq!(
                Value::from(service.external_traffic_policy.unwrap()),
                values["service"]["externalTrafficPolicy"],
                "{file}"
            );
        }

        // NOTES.txt: SPEC §4's AuthenticationConfiguration for this issuer, and a warning
        // for each Secret the values name (none was made here).
        let notes = bed
            .helm_ok(&["get", "notes", &release, "-n", &ns.name])
            .await;
        let mut missing = named.clone();
        if values["database"]["type"] == "postgres" {
            missing.insert(text(&values["database"]["postgres"]["urlSecret"]["name"]));
        }
        if values["ingress"]["enabled"] == true && values["ingress"]["tlsSecretName"] != "" {
            missing.insert(text(&values["ingress"]["tlsSecretName"]));
        }
        for pull in values["imagePullSecrets"].as_array().unwrap() {
            missing.insert(text(&pull["name"]));
        }
        let warned: BTreeSet<String> = notes
            .lines()
            .filter_map(|line| line.trim().strip_prefix("WARNING: the Secret "))
            .filter_map(|rest| rest.split_once(' ').map(|(name, _)| name.to_owned()))
            .collect();
        assert_eq!(warned, missing, "{file}: {notes}");
        let snippet = notes
            .split_once("# --- AuthenticationConfiguration ---\n")
            .and_then(|(_, rest)| rest.split_once("# --- end ---"))
            .map(|(snippet, _)| snippet)
            .unwrap_or_else(|| panic!("{file}: no AuthenticationConfiguration in {notes}"));
        let mut expected = spec_auth.clone();
        expected["jwt"][0]["issuer"]["url"] =
            text(&values["externalURL"]).trim_end_matches('/').into();
        assert_eq!(
            serde_yaml::from_str::<Value>(snippet).unwrap(),
            expected,
            "{file}: {notes}"
        );

        bed.helm_ok(&["uninstall", &release, "-n", &ns.name]).await;
        assert!(
            deployments
                .get_opt("banlieue-console")
                .await
                .unwrap()
                .is_none(),
            "{file}: uninstalled"
        );
        std::fs::remove_file(post_renderer).unwrap();
        ns.delete().await;
    }
}

#[tokio::test]
async fn notes_warn_of_a_secret_without_its_key_and_of_trusting_every_address() {
    let Some(bed) = testbed() else { return };
    let ns = bed.namespace("chart-notes").await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(bed.admin_client().await, &ns.name);
    for (name, key, value) in [
        ("kek", "other", "x"),
        ("old-kek", "key-encryption-key", "hello"),
        ("pull", "token", "x"),
    ] {
        let secret = json!({"metadata": {"name": name}, "stringData": {key: value}});
        secrets
            .create(
                &Default::default(),
                &serde_json::from_value(secret).unwrap(),
            )
            .await
            .unwrap();
    }
    let warnings = |notes: &str| -> Vec<String> {
        notes
            .lines()
            .filter_map(|line| line.trim().strip_prefix("WARNING: "))
            .map(str::to_owned)
            .collect()
    };
    let release = unique_name("notes");
    let post_renderer = namespaced_only(&bed, &release);
    let post_renderer = post_renderer.to_str().unwrap();
    bed.helm_ok(&[
        "install",
        &release,
        CHART,
        "-n",
        &ns.name,
        "--set",
        "keyEncryption.secretName=kek",
        "--set",
        "keyEncryption.previousSecretName=old-kek",
        "--set-json",
        "imagePullSecrets=[{\"name\": \"pull\"}]",
        "--set-json",
        "trustedProxies=[\"10.0.0.0/8\", \"0.0.0.0/0\", \"fd00:10:244::/56\", \"::/8\"]",
        "--post-renderer",
        post_renderer,
    ])
    .await;
    let notes = bed
        .helm_ok(&["get", "notes", &release, "-n", &ns.name])
        .await;
    assert_eq!(
        warnings(&notes),
        [
            format!(
                "the Secret kek in {} has no key key-encryption-key: the console's pods cannot start",
                ns.name
            ),
            format!(
                "the Secret pull in {} holds no registry credentials",
                ns.name
            ),
            "the key key-encryption-key of the Secret old-kek is not 32 bytes in base64".into(),
            "trustedProxies holds 10.0.0.0/8, a range of millions of addresses: any client".into(),
            "trustedProxies holds 0.0.0.0/0, a range of millions of addresses: any client".into(),
            "trustedProxies holds ::/8, a range of millions of addresses: any client".into(),
        ],
        "{notes}"
    );
    bed.helm_ok(&["uninstall", &release, "-n", &ns.name]).await;

    // A namespace helm makes: every Secret named must be made in it.
    let fresh = unique_name("chart-notes-new");
    bed.helm_ok(&[
        "install",
        &release,
        CHART,
        "-n",
        &fresh,
        "--create-namespace",
        "--set",
        "tls.secretName=web",
        "--set",
        "keyEncryption.secretName=kek",
        "--post-renderer",
        post_renderer,
    ])
    .await;
    let notes = bed.helm_ok(&["get", "notes", &release, "-n", &fresh]).await;
    assert_eq!(
        warnings(&notes),
        [format!("{fresh} is new: create the Secrets kek, web in it")],
        "{notes}"
    );
    bed.helm_ok(&["uninstall", &release, "-n", &fresh]).await;
    Api::<k8s_openapi::api::core::v1::Namespace>::all(bed.admin_client().await)
        .delete(&fresh, &Default::default())
        .await
        .unwrap();
    ns.delete().await;
}
