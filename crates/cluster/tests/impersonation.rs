//! What the console's own credentials may impersonate (issue 13): only its own users'
//! `console:<name>`, by name, and no ServiceAccount, uid or extra; only the groups
//! `system:authenticated`, the built-in roles' and each custom role's `console:<role>`;
//! both lists kept by `cluster::impersonable` and by nothing else (the policy
//! `banlieue-console-impersonator-groups`).

mod common;

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use cluster::chart::ClaimSubjectPolicy;
use cluster::ek_authority::EK_CA_SECRET;
use cluster::impersonable::{GROUPS_ROLE, ROLE_LABEL, USERS_ROLE};
use cluster::impersonation::may;
use cluster::{Impersonation, KubernetesIdentity};
use common::*;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

const POLICY: &str = "banlieue-console-impersonator-groups";

/// The API server, with the chart (already installed by helm on the test bed).
async fn start_with_chart() -> (Server, Client) {
    let (server, admin) = start().await;
    if !server.is_real() {
        install_chart(&admin, &ClaimSubjectPolicy::only_issuer(ISSUER)).await;
    }
    (server, admin)
}

/// The console's credentials impersonating `user` with `groups` (and `uid`, `extra`).
async fn console_as(
    server: &Server,
    user: &str,
    groups: &[&str],
    uid: Option<&str>,
    extra: Option<(&str, &str)>,
) -> Client {
    let mut config = console_config(server).await;
    config.auth_info.impersonate = Some(user.into());
    config.auth_info.impersonate_groups = Some(groups.iter().map(|g| g.to_string()).collect());
    config.auth_info.impersonate_uid = uid.map(Into::into);
    config.auth_info.impersonate_user_extra =
        extra.map(|(k, v)| HashMap::from([(k.to_owned(), vec![v.to_owned()])]));
    Client::try_from(config).expect("client")
}

/// The console's own client, impersonating nobody.
async fn console(server: &Server) -> Client {
    Client::try_from(console_config(server).await).expect("client")
}

/// Asks a SelfSubjectAccessReview through `client`: `Ok` when the API server let the
/// console impersonate whom `client` impersonates, else the refusal's message (403).
async fn impersonation(client: &Client) -> Result<(), String> {
    match may(client, "virtualmachinepools", "list", None).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 403 => Err(s.message),
        Err(other) => panic!("unexpected {other:?}"),
    }
}

/// What the API server says when the console may not impersonate `resource` `name`
/// (`userextras/<key>`: the key is the subresource).
fn refused(resource: &str, name: &str, group: &str, scope: &str) -> String {
    let plural = resource.split('/').next().unwrap_or(resource);
    let qualified = if group.is_empty() {
        plural.to_owned()
    } else {
        format!("{plural}.{group}")
    };
    format!(
        "{qualified} \"{name}\" is forbidden: User \"{CONSOLE_SERVICE_ACCOUNT}\" cannot \
         impersonate resource \"{resource}\" in API group \"{group}\" {scope}"
    )
}

/// One change of the users list at a time in this suite (each reads, then writes it).
static USERS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Makes the console's users list hold the console users `add` and not `remove`, keeping
/// everyone else's (the test bed is shared), as the console does after making or deleting
/// a user ([`cluster::impersonable::reconcile_users`] with its own credentials). Returns
/// the list.
async fn console_users(server: &Server, add: &[&str], remove: &[&str]) -> Vec<String> {
    let _one = USERS.lock().await;
    let console = console(server).await;
    let role = Api::<ClusterRole>::all(console.clone())
        .get(USERS_ROLE)
        .await
        .expect("the console reads its users list");
    let mut names: BTreeSet<String> = cluster::impersonable::impersonable_users_in(&role)
        .expect("users by name")
        .iter()
        .filter_map(|user| user.strip_prefix("console:").map(str::to_owned))
        .collect();
    names.extend(add.iter().map(|n| n.to_string()));
    names.retain(|n| !remove.contains(&n.as_str()));
    cluster::impersonable::reconcile_users(&console, cluster::impersonable::users_for(names))
        .await
        .expect("the console keeps its users list with its own credentials")
}

/// Waits until the API server's RBAC (which follows ClusterRoles from a cache) lets
/// `client`'s impersonation through (`true`) or refuses it.
async fn until_impersonation(client: &Client, allowed: bool, what: &str) {
    wait_for(what, Duration::from_secs(20), || async {
        (impersonation(client).await.is_ok() == allowed).then_some(())
    })
    .await;
}

/// A custom role's ClusterRole as kubectl or the Roles page makes it.
fn custom_role(role: &str) -> ClusterRole {
    serde_json::from_value(json!({
        "metadata": {"name": format!("console-role-{role}"), "labels": {ROLE_LABEL: role}},
        "rules": [{"apiGroups": ["banlieue.io"], "resources": ["virtualmachinepools"], "verbs": ["get"]}],
    }))
    .unwrap()
}

/// A role name of this test alone (the test bed is shared).
fn role_name(server: &Server, prefix: &str) -> String {
    if server.is_real() {
        banlieue_testbed::unique_name(prefix)
    } else {
        prefix.to_owned()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_impersonates_its_users_and_only_console_groups() {
    let (server, admin) = start_with_chart().await;
    let cluster = "at the cluster scope";
    // A person with every built-in role: what the console sends.
    let alice = role_name(&server, "alice");
    console_users(&server, &[&alice], &[]).await;
    let person = KubernetesIdentity::console(&alice, ["viewer", "developer", "operator", "admin"]);
    let groups: Vec<&str> = person.groups.iter().map(String::as_str).collect();
    until_impersonation(
        &console_as(&server, &person.user, &groups, None, None).await,
        true,
        "a console person with the built-in roles",
    )
    .await;
    let alice = person.user.as_str();

    for group in ["system:masters", "system:nodes", "console-admin", "admins"] {
        assert_eq!(
            impersonation(&console_as(&server, alice, &[group], None, None).await).await,
            Err(refused("groups", group, "", cluster)),
            "{group}"
        );
    }
    assert_eq!(
        impersonation(
            &console_as(
                &server,
                "system:serviceaccount:kube-system:default",
                &[],
                None,
                None
            )
            .await
        )
        .await,
        Err(refused(
            "serviceaccounts",
            "default",
            "",
            "in the namespace \"kube-system\""
        )),
    );
    assert_eq!(
        impersonation(&console_as(&server, alice, &[], Some("1"), None).await).await,
        Err(refused("uids", "1", "authentication.k8s.io", cluster)),
    );
    assert_eq!(
        impersonation(&console_as(&server, alice, &[], None, Some(("scopes", "all"))).await).await,
        Err(refused(
            "userextras/scopes",
            "all",
            "authentication.k8s.io",
            cluster
        )),
    );

    // A custom role's group is impersonable once the list is kept, and no longer once the
    // role is gone.
    let role = role_name(&server, "imp");
    let group = format!("console:{role}");
    let as_holder = console_as(&server, alice, &[&group], None, None).await;
    assert_eq!(
        impersonation(&as_holder).await,
        Err(refused("groups", &group, "", cluster))
    );
    let roles = Api::<ClusterRole>::all(admin.clone());
    roles
        .create(&PostParams::default(), &custom_role(&role))
        .await
        .unwrap();
    let kept = cluster::impersonable::reconcile(&console(&server).await)
        .await
        .expect("the console keeps its list with its own credentials");
    assert!(kept.contains(&group), "{kept:?}");
    until_impersonation(&as_holder, true, "a custom role's group").await;
    roles
        .delete(&format!("console-role-{role}"), &DeleteParams::default())
        .await
        .unwrap();
    let kept = cluster::impersonable::reconcile(&console(&server).await)
        .await
        .unwrap();
    assert!(!kept.contains(&group), "{kept:?}");
    until_impersonation(&as_holder, false, "the deleted role's group refused").await;
    assert_eq!(
        impersonation(&as_holder).await,
        Err(refused("groups", &group, "", cluster))
    );
    console_users(&server, &[], &[alice.trim_start_matches("console:")]).await;
    server.shutdown().await;
}

/// `current` as `change` leaves it, without its resourceVersion: replaced
/// unconditionally, as the other tests change the list meanwhile (a 409 otherwise).
fn changed(current: &ClusterRole, change: impl FnOnce(&mut serde_json::Value)) -> ClusterRole {
    let mut value = serde_json::to_value(current).unwrap();
    value["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    change(&mut value);
    serde_json::from_value(value).unwrap()
}

/// `current` (one of the two lists) naming `name` too.
fn with_name(current: &ClusterRole, name: &str) -> ClusterRole {
    changed(current, |v| {
        v["rules"][0]["resourceNames"]
            .as_array_mut()
            .unwrap()
            .push(json!(name))
    })
}

/// Changes the policy refuses to either list (`current`), whatever it names: every name,
/// a rule for `other` (the other list's resource), another verb, an aggregationRule, a
/// label that aggregates it into other roles.
fn refused_shapes(current: &ClusterRole, other: &str) -> Vec<(&'static str, ClusterRole)> {
    vec![
        (
            "no names (every one)",
            changed(current, |v| v["rules"][0]["resourceNames"] = json!([])),
        ),
        (
            "names dropped (every one)",
            changed(current, |v| {
                v["rules"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("resourceNames");
            }),
        ),
        (
            "a rule for the other list",
            changed(current, |v| {
                v["rules"].as_array_mut().unwrap().push(json!({
                    "apiGroups": [""], "resources": [other], "verbs": ["impersonate"],
                    "resourceNames": ["console:x"],
                }))
            }),
        ),
        (
            "another verb",
            changed(current, |v| {
                v["rules"][0]["verbs"] = json!(["impersonate", "get"])
            }),
        ),
        (
            "an aggregationRule",
            changed(current, |v| {
                v["aggregationRule"] = json!({"clusterRoleSelectors": [
                    {"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-admin": "true"}}
                ]})
            }),
        ),
        (
            "a label (aggregated into others)",
            changed(current, |v| {
                v["metadata"]["labels"] =
                    json!({"rbac.authorization.k8s.io/aggregate-to-admin": "true"})
            }),
        ),
        (
            "an owner (the garbage collector would delete the list)",
            changed(current, |v| {
                v["metadata"]["ownerReferences"] = json!([{
                    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                    "name": "gone", "uid": "00000000-0000-0000-0000-000000000002",
                }])
            }),
        ),
        (
            "a finalizer (the list could never be deleted)",
            changed(current, |v| {
                v["metadata"]["finalizers"] = json!(["example.com/keep"])
            }),
        ),
    ]
}

/// Expects a 403 from the policy.
fn refused_by_policy<T: std::fmt::Debug>(result: Result<T, kube::Error>, what: &str) {
    match result {
        Err(kube::Error::Api(s)) => {
            assert_eq!(
                (s.code, s.reason.as_str()),
                (403, "Forbidden"),
                "{what}: {}",
                s.message
            );
            assert!(
                s.message.contains(&format!(
                    "ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request: \
                     the console service account may only set which groups and users it impersonates"
                )),
                "{what}: {}",
                s.message
            );
        }
        other => panic!("{what}: expected the policy's refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_creates_only_its_ek_ca_secret_and_reaches_only_its_lease() {
    let (server, _admin) = start_with_chart().await;
    let console = console(&server).await;
    let secrets = Api::<Secret>::namespaced(console.clone(), cluster::chart::RELEASE_NAMESPACE);
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let secret = |name: &str, type_: &str| -> Secret {
        serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": {
                "kubernetes.io/service-account.name": "namespace-controller"}},
            "type": type_,
            "data": {"tls.crt": "eA==", "tls.key": "eA=="},
        }))
        .unwrap()
    };
    for (what, refused) in [
        ("another name", secret("console-made", "kubernetes.io/tls")),
        (
            "a token of another account under the CA's name",
            secret(EK_CA_SECRET, "kubernetes.io/service-account-token"),
        ),
        (
            "an Opaque Secret under the CA's name",
            secret(EK_CA_SECRET, "Opaque"),
        ),
    ] {
        match secrets.create(&dry, &refused).await {
            Err(kube::Error::Api(s)) => assert!(
                s.code == 403
                    && s.message.contains(
                        "the console service account may create only the kubernetes.io/tls \
                         Secret banlieue-simulated-ek-ca"
                    ),
                "{what}: {}",
                s.message
            ),
            other => panic!("{what}: expected the policy's refusal, got {other:?}"),
        }
    }
    // The CA itself may be made (unless a simulated provider made it already).
    match secrets
        .create(&dry, &secret(EK_CA_SECRET, "kubernetes.io/tls"))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        other => panic!("the EK CA: {other:?}"),
    }
    // Providers by the simulated one's name alone.
    let providers = Api::<cluster::crd::VirtualMachineProvider>::all(console.clone());
    let provider = |name: &str| -> cluster::crd::VirtualMachineProvider {
        serde_json::from_value(json!({
            "apiVersion": "banlieue.io/v1alpha1", "kind": "VirtualMachineProvider",
            "metadata": {"name": name}, "spec": {},
        }))
        .unwrap()
    };
    match providers.create(&dry, &provider("trusted-by-me")).await {
        Err(kube::Error::Api(s)) => assert!(
            s.code == 403
                && s.message.contains(
                    "the console service account may create only the VirtualMachineProvider \
                     simulated; refused: trusted-by-me"
                ),
            "{}",
            s.message
        ),
        other => panic!("another provider: expected the policy's refusal, got {other:?}"),
    }
    match providers.create(&dry, &provider("simulated")).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        other => panic!("the simulated provider: {other:?}"),
    }
    // Leases by the controllers' name alone (the suites, which run many controllers on the
    // test bed at once, allow theirs more; a fresh emulator holds only the chart).
    if !server.is_real() {
        let leases = Api::<Lease>::namespaced(console, cluster::chart::RELEASE_NAMESPACE);
        match leases.get("someone-elses").await {
            Err(kube::Error::Api(s)) => assert_eq!(s.code, 403, "{}", s.message),
            other => panic!("another Lease: {other:?}"),
        }
        match leases.get("banlieue-console-controllers").await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) => assert_eq!(s.code, 404, "{}", s.message),
            Err(other) => panic!("the controllers' Lease: {other}"),
        }
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_may_only_list_console_groups_to_impersonate() {
    let (server, admin) = start_with_chart().await;
    let console = console(&server).await;
    let roles = Api::<ClusterRole>::all(console.clone());
    // Dry runs: admission decides, and the shared cluster's list is never changed.
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let current = roles.get(GROUPS_ROLE).await.expect("the console reads it");
    let mut cases = vec![(
        "system:masters added",
        with_name(&current, "system:masters"),
    )];
    cases.extend(refused_shapes(&current, "users"));
    for (what, role) in cases {
        refused_by_policy(roles.replace(GROUPS_ROLE, &dry, &role).await, what);
    }
    // A console group: granting its impersonation is more than the console holds, which
    // `escalate` on this one ClusterRole allows.
    roles
        .replace(
            GROUPS_ROLE,
            &dry,
            &with_name(&current, "console:newly-made"),
        )
        .await
        .expect("a console group may be added");
    // RBAC: no other ClusterRole is the console's to change, make or delete.
    for result in [
        roles
            .delete(
                "console-admin",
                &DeleteParams {
                    dry_run: true,
                    ..DeleteParams::default()
                },
            )
            .await
            .map(|_| ()),
        roles
            .create(&dry, &custom_role("by-the-console"))
            .await
            .map(|_| ()),
    ] {
        match result {
            Err(kube::Error::Api(s)) => assert_eq!(s.code, 403, "{}", s.message),
            other => panic!("expected RBAC's refusal, got {other:?}"),
        }
    }
    // Kubernetes' own administrators are not held to it.
    Api::<ClusterRole>::all(admin)
        .replace(
            GROUPS_ROLE,
            &dry,
            &changed(&current, |v| {
                v["rules"][0]["resourceNames"] = json!(["system:masters"])
            }),
        )
        .await
        .expect("the cluster's admin may (a dry run)");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controllers_keep_custom_roles_groups_impersonable() {
    let (server, admin) = start_with_chart().await;
    // The controllers as the console's ServiceAccount with the chart's RBAC (its Lease in
    // the release namespace, named for this test).
    banlieue_testbed::allow_leases_of_any_name(&admin).await;
    let sa = console(&server).await;
    let mut config = test_config(&admin, "impersonable");
    config.lease_namespace = cluster::chart::RELEASE_NAMESPACE.into();
    config.lease_name = format!("impersonable-{}", server.namespace());
    config.simulated_provider = None;
    let running = spawn_controllers(&sa, config);

    let role = role_name(&server, "kubectl-made");
    let group = format!("console:{role}");
    let roles = Api::<ClusterRole>::all(admin.clone());
    let names = || async {
        let role = roles.get(GROUPS_ROLE).await.unwrap();
        cluster::impersonable::impersonable_in(&role).expect("named groups")
    };
    // A role made with kubectl, not through the console.
    roles
        .create(&PostParams::default(), &custom_role(&role))
        .await
        .unwrap();
    wait_for(
        "the role's group listed",
        Duration::from_secs(20),
        || async { names().await.contains(&group).then_some(()) },
    )
    .await;
    let bob = role_name(&server, "bob");
    console_users(&server, &[&bob], &[]).await;
    let as_holder = console_as(&server, &format!("console:{bob}"), &[&group], None, None).await;
    until_impersonation(&as_holder, true, "the new role's group").await;
    roles
        .delete(&format!("console-role-{role}"), &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the role's group gone", Duration::from_secs(20), || async {
        (!names().await.contains(&group)).then_some(())
    })
    .await;
    assert!(impersonation(&as_holder).await.is_err());
    console_users(&server, &[], &[&bob]).await;
    running.stop().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_the_cluster_does_not_know_is_left_out_not_refused() {
    let (server, _admin) = start_with_chart().await;
    let access = std::sync::Arc::new(Impersonation::new(console_config(&server).await));
    let follow = tokio::spawn(access.clone().follow_impersonable());
    let carol = role_name(&server, "carol");
    console_users(&server, &[&carol], &[]).await;
    // Held in the console, but no ClusterRole of that name: impersonated with it, the
    // person could do nothing at all.
    let person = KubernetesIdentity::console(&carol, ["developer", "never-made"]);
    wait_for("the list followed", Duration::from_secs(20), || async {
        (access.narrowed(&person).groups == ["console:developer", "system:authenticated"])
            .then_some(())
    })
    .await;
    let client = access.client_for(&person).unwrap();
    until_impersonation(&client, true, "served with the groups the cluster knows").await;
    console_users(&server, &[], &[&carol]).await;
    follow.abort();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_impersonates_only_its_own_users_by_name() {
    let (server, _admin) = start_with_chart().await;
    let cluster = "at the cluster scope";
    // The names Kubernetes binds (the controller manager is in effect cluster-admin), and
    // anyone the console does not have.
    for user in [
        "system:kube-controller-manager",
        "system:admin",
        "system:kube-scheduler",
        "anyone-at-all",
        "console:never-made",
    ] {
        assert_eq!(
            impersonation(&console_as(&server, user, &[], None, None).await).await,
            Err(refused("users", user, "", cluster)),
            "{user}"
        );
    }
    // The bootstrap admin, listed (the chart lists them; a console run on the shared test
    // bed before this test may have written its own users instead).
    console_users(&server, &["admin"], &[]).await;
    let as_admin = console_as(
        &server,
        "console:admin",
        &["console:admin", "system:authenticated"],
        None,
        None,
    )
    .await;
    until_impersonation(&as_admin, true, "the bootstrap admin").await;
    // A user made now is impersonable once the console updates its list, and no longer
    // once deleted.
    let name = role_name(&server, "newcomer");
    let user = format!("console:{name}");
    let as_them = console_as(&server, &user, &["system:authenticated"], None, None).await;
    assert_eq!(
        impersonation(&as_them).await,
        Err(refused("users", &user, "", cluster))
    );
    let kept = console_users(&server, &[&name], &[]).await;
    assert!(kept.contains(&user), "{kept:?}");
    assert!(kept.contains(&"console:admin".to_owned()), "{kept:?}");
    until_impersonation(&as_them, true, "the new user impersonable").await;
    let kept = console_users(&server, &[], &[&name]).await;
    assert!(!kept.contains(&user), "{kept:?}");
    until_impersonation(&as_them, false, "the deleted user no longer impersonable").await;
    assert_eq!(
        impersonation(&as_them).await,
        Err(refused("users", &user, "", cluster))
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_may_only_list_console_users_and_tenant_people_to_impersonate() {
    let (server, _admin) = start_with_chart().await;
    let roles = Api::<ClusterRole>::all(console(&server).await);
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let current = roles.get(USERS_ROLE).await.expect("the console reads it");
    let mut cases = vec![
        (
            "system:kube-controller-manager added",
            with_name(&current, "system:kube-controller-manager"),
        ),
        ("system:admin added", with_name(&current, "system:admin")),
        ("a name without the prefix", with_name(&current, "admin")),
        (
            "a prefix that only starts alike",
            with_name(&current, "oidcx:acme:t-1"),
        ),
    ];
    cases.extend(refused_shapes(&current, "groups"));
    for (what, role) in cases {
        refused_by_policy(roles.replace(USERS_ROLE, &dry, &role).await, what);
    }
    roles
        .replace(USERS_ROLE, &dry, &with_name(&current, "console:newly-made"))
        .await
        .expect("a console user may be added");
    roles
        .replace(USERS_ROLE, &dry, &with_name(&current, "oidc:acme:t-1"))
        .await
        .expect("a tenant's person may be added");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_follows_the_users_list_whoever_writes_it() {
    let (server, _admin) = start_with_chart().await;
    let access = std::sync::Arc::new(Impersonation::new(console_config(&server).await));
    let follow = tokio::spawn(access.clone().follow_impersonable());
    let name = role_name(&server, "dora");
    let dora = KubernetesIdentity::console(&name, ["developer"]);
    // Another replica lists a user this one has not written (made a moment ago there)...
    console_users(&server, &[&name], &[]).await;
    wait_for(
        "the new user seen listed",
        Duration::from_secs(20),
        || async { (!access.lacks_user(&dora)).then_some(()) },
    )
    .await;
    // ...then one writes the list from a read made before she existed: this console sees
    // her missing, so it updates the list before acting for her.
    console_users(&server, &[], &[&name]).await;
    wait_for("the user seen missing", Duration::from_secs(20), || async {
        access.lacks_user(&dora).then_some(())
    })
    .await;
    follow.abort();
    server.shutdown().await;
}
