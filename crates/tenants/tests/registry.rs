//! The registry over its two sources: strict at start, lenient on refresh, distrusted
//! when stale.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::write_tenants;
use tenants::registry::STALE_AFTER_INTERVALS;
use tenants::{LoadError, Refresh, TenantRegistry, TenantSource};

const INTERVAL: Duration = Duration::from_secs(30);

fn tenant(id: &str) -> Value {
    json!({
        "apiVersion": "console.banlieue.io/v1alpha1",
        "kind": "ConsoleTenant",
        "metadata": {"name": id},
        "spec": {
            "tenantId": id,
            "oidc": {
                "issuer": format!("https://{id}.example"),
                "audience": "banlieue-console",
                "tenantClaim": "tenant",
                "usernameClaim": "sub",
                "rolesClaim": "roles",
            },
            "defaultRole": "viewer",
            "allowedRoles": ["viewer"],
            "namespaces": [id],
        },
    })
}

fn ids(registry: &TenantRegistry, now: Instant) -> Vec<String> {
    registry
        .current(now)
        .unwrap()
        .tenants
        .keys()
        .cloned()
        .collect()
}

#[tokio::test]
async fn start_is_strict_about_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tenants.yaml");
    let source = || TenantSource::File { path: path.clone() };
    let now = Instant::now();

    let missing = TenantRegistry::load(source(), INTERVAL, now)
        .await
        .err()
        .unwrap();
    assert!(matches!(missing, LoadError::Read(_)), "{missing}");
    assert!(
        missing
            .to_string()
            .starts_with("cannot read the tenants file"),
        "{missing}"
    );

    let mut bad = tenant("globex");
    bad["spec"]["defaultRole"] = json!("admin");
    write_tenants(&path, &[tenant("acme"), bad]);
    let refused = TenantRegistry::load(source(), INTERVAL, now)
        .await
        .err()
        .unwrap();
    assert_eq!(
        refused.to_string(),
        format!(
            "{}, document 2 (globex): spec.defaultRole: admin is not in allowedRoles (viewer)",
            path.display()
        )
    );

    write_tenants(&path, &[tenant("acme"), tenant("globex")]);
    let (registry, warnings) = TenantRegistry::load(source(), INTERVAL, now).await.unwrap();
    assert!(warnings.is_empty());
    assert_eq!(ids(&registry, now), ["acme", "globex"]);
}

#[tokio::test]
async fn a_refresh_drops_only_the_broken_tenant_and_a_failed_read_keeps_the_last_set() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tenants.yaml");
    write_tenants(&path, &[tenant("acme"), tenant("globex")]);
    let start = Instant::now();
    let (registry, _) =
        TenantRegistry::load(TenantSource::File { path: path.clone() }, INTERVAL, start)
            .await
            .unwrap();

    // globex edited into an invalid document at runtime: only globex goes.
    let mut broken = tenant("globex");
    broken["spec"]["oidc"]["jwksURL"] = json!("http://keys.globex.example/jwks");
    write_tenants(&path, &[tenant("acme"), broken]);
    let later = start + INTERVAL;
    match registry.refresh(later).await {
        Refresh::Read { tenants, refused } => {
            assert_eq!(tenants, 1);
            assert_eq!(refused.len(), 1);
            assert_eq!(refused[0].field, "spec.oidc.jwksURL");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(ids(&registry, later), ["acme"]);

    // The file gone: the last set stays, until it is stale.
    std::fs::remove_file(&path).unwrap();
    let failed = start + 2 * INTERVAL;
    assert!(matches!(registry.refresh(failed).await, Refresh::Failed(_)));
    assert_eq!(ids(&registry, failed), ["acme"]);
    let allowed = INTERVAL * STALE_AFTER_INTERVALS;
    assert_eq!(ids(&registry, later + allowed), ["acme"]);
    let stale = registry
        .current(later + allowed + Duration::from_secs(1))
        .unwrap_err();
    assert_eq!(stale.allowed, allowed);
    assert!(
        stale
            .to_string()
            .starts_with("the tenants were last read 301 s ago"),
        "{stale}"
    );

    // Fixed: trusted again from that read.
    write_tenants(&path, &[tenant("acme"), tenant("globex")]);
    let fixed = later + allowed + INTERVAL;
    assert!(matches!(
        registry.refresh(fixed).await,
        Refresh::Read { tenants: 2, .. }
    ));
    assert_eq!(ids(&registry, fixed), ["acme", "globex"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubernetes_source_lists_the_console_namespace() {
    use cluster::chart;
    use kube_emulator::{Emulator, EmulatorConfig};
    let emulator = Emulator::start(EmulatorConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..EmulatorConfig::default()
    })
    .await
    .unwrap();
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(&emulator.kubeconfig_yaml()).unwrap(),
        &Default::default(),
    )
    .await
    .unwrap();
    let admin = kube::Client::try_from(config).unwrap();
    chart::install(
        &admin,
        &chart::ClaimSubjectPolicy::only_issuer("https://console.example"),
    )
    .await
    .unwrap();
    let mut elsewhere = tenant("initech");
    elsewhere["metadata"]["namespace"] = json!("default");
    let mut here = tenant("acme");
    here["metadata"]["namespace"] = json!(chart::RELEASE_NAMESPACE);
    let documents = format!(
        "{}---\n{}",
        serde_yaml::to_string(&here).unwrap(),
        serde_yaml::to_string(&elsewhere).unwrap()
    );
    chart::apply(&admin, &chart::parse_documents(&documents).unwrap())
        .await
        .unwrap();

    let source = TenantSource::Kubernetes {
        client: admin,
        namespace: chart::RELEASE_NAMESPACE.into(),
    };
    let now = Instant::now();
    let (registry, _) = TenantRegistry::load(source, INTERVAL, now).await.unwrap();
    let snapshot = registry.current(now).unwrap();
    assert_eq!(snapshot.tenants.keys().collect::<Vec<_>>(), ["acme"]);
    assert_eq!(
        snapshot.tenants["acme"].origin,
        format!("ConsoleTenant {}/acme", chart::RELEASE_NAMESPACE)
    );
}
