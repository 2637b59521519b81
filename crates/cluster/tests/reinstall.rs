//! `helm upgrade`, then `helm uninstall` and `helm install`, of the chart on the test
//! bed's real kube-apiserver: an upgrade keeps what the console added to its impersonator
//! lists; after a reinstall cluster RBAC is writable by a cluster administrator and the
//! chart's admission policies hold again. A policy that read its settings from a parameter
//! object (a ConfigMap deleted and re-created by the reinstall) was left refusing every
//! ClusterRole write, cluster-admin's too: the API server stopped seeing the re-created
//! parameters (kubernetes/kubernetes#130887). Its own test binary, so that no other suite
//! runs while the release is away. Without the test bed it does nothing.

use std::time::Duration;

use banlieue_testbed::{RELEASE, RELEASE_NAMESPACE, Testbed, unique_name};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

/// The chart's directory.
const CHART: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../charts/banlieue-console");

fn probe_role(name: &str) -> ClusterRole {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "rules": [{"apiGroups": ["banlieue.io"], "resources": ["virtualmachineclaims"], "verbs": ["get"]}],
    }))
    .unwrap()
}

#[tokio::test]
async fn an_upgrade_keeps_the_impersonator_lists_and_after_a_reinstall_rbac_is_writable() {
    let Some(bed) = Testbed::from_env("the reinstall suite") else {
        return;
    };
    let values = bed.dir().join("values.yaml");
    let values = values.to_str().unwrap();

    // An upgrade keeps the users the console made impersonable since the install.
    let roles: Api<ClusterRole> = Api::all(bed.admin_client().await);
    let users = "banlieue-console-impersonator-users";
    let mut list = roles.get(users).await.unwrap();
    let added = unique_name("console:kept");
    list.rules.as_mut().unwrap()[0]
        .resource_names
        .as_mut()
        .unwrap()
        .push(added.clone());
    roles
        .replace(users, &PostParams::default(), &list)
        .await
        .unwrap();
    bed.helm_ok(&[
        "upgrade",
        RELEASE,
        CHART,
        "-n",
        RELEASE_NAMESPACE,
        "-f",
        values,
    ])
    .await;
    let names = roles.get(users).await.unwrap().rules.unwrap()[0]
        .resource_names
        .clone()
        .unwrap();
    assert!(names.contains(&added), "{names:?}");
    assert!(names.contains(&"console:admin".to_owned()), "{names:?}");

    bed.helm_ok(&["uninstall", RELEASE, "-n", RELEASE_NAMESPACE, "--wait"])
        .await;
    bed.helm_ok(&[
        "install",
        RELEASE,
        CHART,
        "-n",
        RELEASE_NAMESPACE,
        "-f",
        values,
        "--timeout",
        "2m",
    ])
    .await;

    // The policy is loaded once it refuses a console identity's ClusterRole of another
    // name (a dry run: nothing is stored either way).
    let console = bed
        .impersonating("console:root", &["console:admin", "system:authenticated"])
        .await;
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let foreign = probe_role(&unique_name("not-console"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match Api::<ClusterRole>::all(console.clone())
            .create(&dry_run, &foreign)
            .await
        {
            Err(kube::Error::Api(s)) if s.message.contains("banlieue-console-roles") => break,
            other => assert!(
                tokio::time::Instant::now() < deadline,
                "the roles policy did not come back after the reinstall: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A cluster administrator writes cluster RBAC as before, every time.
    let admin: Api<ClusterRole> = Api::all(bed.admin_client().await);
    for _ in 0..10 {
        let name = unique_name("reinstall-probe");
        admin
            .create(&PostParams::default(), &probe_role(&name))
            .await
            .unwrap_or_else(|e| panic!("cluster-admin may not create a ClusterRole: {e}"));
        admin.delete(&name, &DeleteParams::default()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}
