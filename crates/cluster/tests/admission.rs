//! The chart's ValidatingAdmissionPolicy (claim design seed, section 2: five validations),
//! exercised as different impersonated users, and the controllers running as the console's
//! ServiceAccount with the chart's RBAC.

mod common;

use std::time::Duration;

use cluster::chart::{ClaimSubjectPolicy, RELEASE_NAMESPACE};
use common::*;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

const DEX: &str = "https://dex.example.com";

/// The policy's parameters: blank lines and spaces around entries are ignored.
fn policy() -> ClaimSubjectPolicy {
    ClaimSubjectPolicy {
        issuers: format!("{ISSUER}\n\n  {DEX}  \n"),
        brokers: "console:broker\n".into(),
        issuer_prefixes: format!("{DEX}=github:\n"),
    }
}

/// `console:developer` and `console:operator` may create, change and delete claims in the
/// test's namespace (RBAC), like SPEC §5's roles: what they may do beyond that is the
/// policies' say. A Role, so nothing outlives the test's namespace on the test bed.
async fn developer_role(admin: &Client) {
    let ns = admin.default_namespace();
    let objects = cluster::chart::parse_documents(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: admission-test-developer, namespace: {ns}}}
rules:
- apiGroups: [banlieue.io]
  resources: [virtualmachineclaims]
  verbs: [get, list, watch, create, update, patch, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: admission-test-developer, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: admission-test-developer}}
subjects:
- {{apiGroup: rbac.authorization.k8s.io, kind: Group, name: 'console:developer'}}
- {{apiGroup: rbac.authorization.k8s.io, kind: Group, name: 'console:operator'}}
"
    ))
    .unwrap();
    cluster::chart::apply(admin, &objects).await.unwrap();
}

fn claim_from(name: &str, issuer: &str, id: &str) -> cluster::crd::VirtualMachineClaim {
    let mut c = claim(name, "p", 600, id);
    c.spec.subject.issuer = issuer.into();
    c
}

/// Expects a 403 from the subject policy carrying `message`.
fn refused<T: std::fmt::Debug>(result: Result<T, kube::Error>, message: &str) {
    refused_by("banlieue-claim-subject", result, message)
}

/// Expects a 403 from the ValidatingAdmissionPolicy `policy` carrying `message`.
fn refused_by<T: std::fmt::Debug>(policy: &str, result: Result<T, kube::Error>, message: &str) {
    match result {
        Err(kube::Error::Api(s)) => {
            assert_eq!(
                (s.code, s.reason.as_str()),
                (403, "Forbidden"),
                "{}",
                s.message
            );
            let denied = format!(
                "ValidatingAdmissionPolicy '{policy}' with binding '{policy}' denied request"
            );
            assert!(s.message.contains(&denied), "{}", s.message);
            assert!(
                s.message.contains(message),
                "{}\n  wanted: {message}",
                s.message
            );
        }
        other => panic!("expected the policy to refuse, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claim_release_policy() {
    let (emu, admin) = start().await;
    if !emu.is_real() {
        install_chart(&admin, &policy()).await;
    }
    developer_role(&admin).await;
    let as_user = |user: &'static str, group: &'static str| {
        let emu = &emu;
        async move { claims(&impersonating(emu, user, &[group, "system:authenticated"]).await) }
    };
    let alice = as_user("console:alice", "console:developer").await;
    let bob = as_user("console:bob", "console:developer").await;
    let oscar = as_user("console:oscar", "console:operator").await;
    let broker = as_user("console:broker", "console:developer").await;
    let octocat = as_user("github:octocat", "console:developer").await;
    let console_octocat = as_user("console:octocat", "console:developer").await;
    let pp = PostParams::default();
    for name in ["a1", "a2", "a3", "a4"] {
        alice
            .create(&pp, &claim_from(name, ISSUER, "alice"))
            .await
            .expect("alice claims");
    }
    let dp = kube::api::DeleteParams::default();
    // A subject whose issuer has its own prefix releases their own claim; the same id
    // under the default prefix is someone else.
    octocat
        .create(&pp, &claim_from("octo", DEX, "octocat"))
        .await
        .expect("octocat claims");
    refused_by(
        "banlieue-claim-release",
        console_octocat.delete("octo", &dp).await,
        "only octocat, an operator or an admin may release the claim octo; you are signed in \
         as console:octocat",
    );
    octocat
        .delete("octo", &dp)
        .await
        .expect("the issuer's own prefix applies to releases too");
    // Another developer may not release alice's claim, whatever RBAC allows.
    refused_by(
        "banlieue-claim-release",
        bob.delete("a1", &dp).await,
        "only alice, an operator or an admin may release the claim a1; you are signed in as \
         console:bob",
    );
    // Its subject, an operator, a broker and a system identity may.
    alice.delete("a1", &dp).await.expect("the subject releases");
    oscar.delete("a2", &dp).await.expect("an operator releases");
    broker.delete("a3", &dp).await.expect("a broker releases");
    let controllers = claims(
        &impersonating(
            &emu,
            &format!("system:serviceaccount:{RELEASE_NAMESPACE}:banlieue-console"),
            &["system:serviceaccounts", "system:authenticated"],
        )
        .await,
    );
    controllers
        .delete("a4", &dp)
        .await
        .expect("the controllers' ServiceAccount releases an expired claim");
    alice
        .create(&pp, &claim_from("a5", ISSUER, "alice"))
        .await
        .expect("alice claims");
    claims(
        &impersonating(
            &emu,
            "kubernetes-admin",
            &["system:masters", "system:authenticated"],
        )
        .await,
    )
    .delete("a5", &dp)
    .await
    .expect("a cluster administrator releases any claim");
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claim_subject_policy() {
    let (emu, admin) = start().await;
    // The test bed's chart was installed by helm with these parameters (scripts/testbed).
    if !emu.is_real() {
        install_chart(&admin, &policy()).await;
    }
    developer_role(&admin).await;
    let dev = ["console:developer", "system:authenticated"];
    let alice = claims(&impersonating(&emu, "console:alice", &dev).await);
    let broker = claims(&impersonating(&emu, "console:broker", &dev).await);
    let octocat = claims(&impersonating(&emu, "github:octocat", &dev).await);
    let console_octocat = claims(&impersonating(&emu, "console:octocat", &dev).await);
    let pp = PostParams::default();

    // 1. The subject is the caller (with the issuer's prefix) unless the caller is a broker.
    alice
        .create(&pp, &claim_from("mine", ISSUER, "alice"))
        .await
        .expect("a claim for oneself");
    refused(
        alice
            .create(&pp, &claim_from("theirs", ISSUER, "bob"))
            .await,
        "spec.subject must be you: you are signed in as console:alice, but spec.subject.id bob \
         of issuer https://console.example.com is the user console:bob; only a broker may \
         claim a sandbox for someone else",
    );
    broker
        .create(&pp, &claim_from("for-bob", ISSUER, "bob"))
        .await
        .expect("a broker claims for others");
    octocat
        .create(&pp, &claim_from("octo", DEX, "octocat"))
        .await
        .expect("the issuer's own prefix applies");
    refused(
        console_octocat
            .create(&pp, &claim_from("octo2", DEX, "octocat"))
            .await,
        "is the user github:octocat",
    );

    // 2. The issuer is allowlisted (brokers included).
    refused(
        alice
            .create(&pp, &claim_from("evil", "https://evil.example", "alice"))
            .await,
        "spec.subject.issuer https://evil.example is not an allowed issuer; allowed issuers: \
         https://console.example.com, https://dex.example.com",
    );
    refused(
        broker
            .create(&pp, &claim_from("evil", "https://evil.example", "bob"))
            .await,
        "is not an allowed issuer",
    );

    // 3–5. subject, poolRef and ttlSeconds never change, for anyone (admin included).
    let admin_claims = claims(&admin);
    let merge = |v: Value| Patch::Merge(v);
    refused(
        alice
            .patch(
                "mine",
                &PatchParams::default(),
                &merge(json!({"spec": {"subject": {"id": "bob"}}})),
            )
            .await,
        "spec.subject cannot be changed after creation (it is alice of issuer \
         https://console.example.com); create a new claim instead",
    );
    refused(
        admin_claims
            .patch(
                "mine",
                &PatchParams::default(),
                &merge(json!({"spec": {"subject": {"issuer": DEX}}})),
            )
            .await,
        "spec.subject cannot be changed",
    );
    refused(
        alice
            .patch(
                "mine",
                &PatchParams::default(),
                &merge(json!({"spec": {"poolRef": "other"}})),
            )
            .await,
        "spec.poolRef cannot be changed after creation (it is p); create a new claim for pool \
         other instead",
    );
    refused(
        admin_claims
            .patch(
                "mine",
                &PatchParams::default(),
                &merge(json!({"spec": {"ttlSeconds": 99999}})),
            )
            .await,
        "spec.ttlSeconds cannot be changed after creation (it is 600): the deadline is fixed \
         when the claim binds",
    );
    alice
        .patch(
            "mine",
            &PatchParams::default(),
            &merge(json!({"metadata": {"labels": {"team": "blue"}}})),
        )
        .await
        .expect("other updates by the author pass");

    // The controllers, as the console's ServiceAccount with the chart's RBAC, add their
    // finalizer (an UPDATE by someone who is not the subject) and write status.
    let sa = impersonating(
        &emu,
        &format!("system:serviceaccount:{RELEASE_NAMESPACE}:banlieue-console"),
        &[
            "system:serviceaccounts",
            &format!("system:serviceaccounts:{RELEASE_NAMESPACE}"),
            "system:authenticated",
        ],
    )
    .await;
    create_pool(&admin, &pool("p", 1, 4, "r1")).await;
    // The chart lets the ServiceAccount hold its Lease in the release namespace only (and
    // this test's, named for it, only as the suites allow).
    banlieue_testbed::allow_leases_of_any_name(&admin).await;
    let mut config = test_config(&sa, "sa");
    config.lease_namespace = RELEASE_NAMESPACE.into();
    config.lease_name = format!("admission-{}", emu.namespace());
    let running = spawn_controllers(&sa, config);
    for name in ["mine", "for-bob", "octo"] {
        let bound = wait_phase(&admin, name, "Bound", Duration::from_secs(20)).await;
        assert!(
            bound
                .finalizers()
                .iter()
                .any(|f| f == "banlieue.io/claim-protection")
        );
    }
    assert_eq!(running.metrics.reconcile_errors.total(), 0);
    running.stop().await;

    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_identities_change_only_the_roles_page_rbac() {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let (emu, admin) = start().await;
    if !emu.is_real() {
        install_chart(&admin, &policy()).await;
    }
    let root = impersonating(
        &emu,
        "console:root",
        &["console:admin", "system:authenticated"],
    )
    .await;
    let roles: Api<ClusterRole> = Api::all(root.clone());
    let bindings: Api<ClusterRoleBinding> = Api::all(root.clone());
    // Dry runs: admission decides, and nothing of the shared cluster is ever changed.
    let dry_delete = kube::api::DeleteParams {
        dry_run: true,
        ..kube::api::DeleteParams::default()
    };
    let dry_patch = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    let denied = "may change only the ClusterRoles and ClusterRoleBindings of the Roles page";
    refused_by(
        "banlieue-console-roles",
        bindings.delete("cluster-admin", &dry_delete).await,
        denied,
    );
    refused_by(
        "banlieue-console-roles",
        roles
            .patch(
                "system:basic-user",
                &dry_patch,
                &Patch::Merge(json!({"metadata": {"labels": {"console.banlieue.io/role": "x"}}})),
            )
            .await,
        denied,
    );
    let unlabelled: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": "console-role-unlabelled"},
        "rules": [],
    }))
    .unwrap();
    refused_by(
        "banlieue-console-roles",
        roles
            .create(
                &PostParams {
                    dry_run: true,
                    ..PostParams::default()
                },
                &unlabelled,
            )
            .await,
        denied,
    );
    // Named and labelled like the Roles page's, but not what it writes: refused too.
    let dry_create = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let written = "must be what the Roles page writes for its role";
    let everyone_admin: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "console-role-evil", "labels": {"console.banlieue.io/role": "evil"}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "console-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}],
    }))
    .unwrap();
    refused_by(
        "banlieue-console-roles",
        bindings.create(&dry_create, &everyone_admin).await,
        written,
    );
    // Its own name and label, but the admin's role.
    let group = |name: &str| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": name});
    let binding = |name: &str, role: &str, role_ref: &str, subject: Value| -> ClusterRoleBinding {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"console.banlieue.io/role": role}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_ref},
            "subjects": [subject],
        }))
        .unwrap()
    };
    refused_by(
        "banlieue-console-roles",
        bindings
            .create(
                &dry_create,
                &binding(
                    "console-role-evil",
                    "evil",
                    "console-admin",
                    group("console:evil"),
                ),
            )
            .await,
        written,
    );
    // Rules beyond a custom role's: the policy refuses even what this admin holds; what
    // they do not hold, RBAC's escalation check refuses before admission is asked.
    let evil_role = |body: Value| -> ClusterRole {
        let mut role = json!({
            "metadata": {"name": "console-role-evil", "labels": {"console.banlieue.io/role": "evil"}},
        });
        role.as_object_mut()
            .unwrap()
            .extend(body.as_object().unwrap().clone());
        serde_json::from_value(role).unwrap()
    };
    for rules in [
        json!([{"apiGroups": ["banlieue.io"], "resources": ["virtualmachineproviders"], "verbs": ["get"]}]),
        json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["get"]}]),
        json!([{"apiGroups": ["banlieue.io"], "resources": ["virtualmachinepools"], "verbs": ["get"], "resourceNames": ["x"]}]),
    ] {
        refused_by(
            "banlieue-console-roles",
            roles
                .create(&dry_create, &evil_role(json!({ "rules": rules })))
                .await,
            written,
        );
    }
    // A label beside its own could aggregate its rules into a built-in role (edit, view).
    let aggregated: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": "console-role-evil", "labels": {
            "console.banlieue.io/role": "evil",
            "rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
        "rules": [{"apiGroups": ["banlieue.io"], "resources": ["virtualmachineclaims"], "verbs": ["get", "delete"]}],
    }))
    .unwrap();
    refused_by(
        "banlieue-console-roles",
        roles.create(&dry_create, &aggregated).await,
        written,
    );
    for body in [
        json!({"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
        json!({"rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}),
        json!({"aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-admin": "true"}}]}}),
    ] {
        match roles.create(&dry_create, &evil_role(body.clone())).await {
            Err(kube::Error::Api(s)) if s.code == 403 => {}
            other => panic!("{body}: expected a refusal, got {other:?}"),
        }
    }

    // A role of the Roles page: made, and then it cannot lose its label.
    let role = format!("policy-{}", emu.namespace());
    let name = format!("console-role-{role}");
    let own: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"console.banlieue.io/role": role}},
        "rules": [{"apiGroups": ["banlieue.io"], "resources": ["virtualmachinepools"], "verbs": ["get"]}],
    }))
    .unwrap();
    roles
        .create(&PostParams::default(), &own)
        .await
        .expect("a console role is the console's to make");
    // Its binding may bind it to its own group only: not another group, not a user.
    for subject in [
        group("console:admin"),
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "console:evil"}),
    ] {
        refused_by(
            "banlieue-console-roles",
            bindings
                .create(&dry_create, &binding(&name, &role, &name, subject))
                .await,
            written,
        );
    }
    bindings
        .create(
            &dry_create,
            &binding(&name, &role, &name, group(&format!("console:{role}"))),
        )
        .await
        .expect("its own binding is the console's to make");
    refused_by(
        "banlieue-console-roles",
        roles
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"console.banlieue.io/role": null}}})),
            )
            .await,
        denied,
    );
    roles
        .delete(&name, &kube::api::DeleteParams::default())
        .await
        .expect("and to delete");
    // Kubernetes' own administrators are not console identities.
    Api::<ClusterRoleBinding>::all(admin.clone())
        .delete("cluster-admin", &dry_delete)
        .await
        .expect("the cluster's admin may (a dry run here)");
    emu.shutdown().await;
}
