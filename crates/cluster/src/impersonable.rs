//! The groups the console may impersonate (issue 13): `system:authenticated`, the built-in
//! roles' groups and each custom role's group `console:<role>`, named one by one in the
//! chart's ClusterRole [`GROUPS_ROLE`], so `system:masters` or any other group is out of
//! the console's reach.
//!
//! The chart lists the first five; [`reconcile`] keeps the list equal to what the custom
//! roles (ClusterRoles labelled [`ROLE_LABEL`], however they were made) need, with the
//! console's own credentials. The controllers run it at start, whenever a labelled
//! ClusterRole or [`GROUPS_ROLE`] itself changes, and every minute ([`keep_reconciled`]);
//! the Roles page runs it after each change. The chart's admission policy
//! `banlieue-console-impersonator-groups` keeps the console's service account from writing
//! anything but such a list there.
//!
//! Users likewise (issue 13): only `console:<name>` for each of the console's own users
//! and `oidc:<tenant>:<sub>` for each tenant person it recently acted for, named in
//! [`USERS_ROLE`], so `system:kube-controller-manager`, `system:admin` or any
//! name Kubernetes binds is out of reach. The cluster cannot see the console's database,
//! so the server keeps that list ([`reconcile_users`], through
//! `Impersonation::update_impersonable_users`): at start, every minute, after the console
//! makes or deletes a user, and before acting for a person the last list lacked. The chart
//! lists `console:admin`, the bootstrap admin; the policy holds the service account to
//! `console:` and `oidc:` names there.

use std::collections::BTreeSet;
use std::future::Future;
use std::time::Duration;

use banlieue_domain::{BuiltinRole, RoleName};
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube::api::{ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};

use crate::Error;
use crate::error::is_status;
use crate::impersonation::{AUTHENTICATED_GROUP, CONSOLE_PREFIX};

/// The chart's ClusterRole naming the groups the console may impersonate.
pub const GROUPS_ROLE: &str = "banlieue-console-impersonator-groups";
/// The chart's ClusterRole naming the users the console may impersonate.
pub const USERS_ROLE: &str = "banlieue-console-impersonator-users";
/// The label of a custom role's ClusterRole; its value is the role's name (SPEC §5).
pub const ROLE_LABEL: &str = "console.banlieue.io/role";

/// How often [`keep_reconciled`] checks even when nothing changed.
const RESYNC: Duration = Duration::from_secs(60);
/// How soon [`keep_reconciled`] tries again after a failed pass.
const RETRY: Duration = Duration::from_secs(5);

/// The groups the console impersonates, given the custom roles' ClusterRoles:
/// `system:authenticated`, `console:<role>` for each built-in role (as the chart lists
/// them), then for each custom role (by its [`ROLE_LABEL`], when that is a role name)
/// in name order.
pub fn groups_for(custom_roles: &[ClusterRole]) -> Vec<String> {
    let mut groups = vec![AUTHENTICATED_GROUP.to_owned()];
    groups.extend(
        BuiltinRole::ALL
            .iter()
            .map(|role| format!("{CONSOLE_PREFIX}{}", role.as_str())),
    );
    let custom: BTreeSet<String> = custom_roles
        .iter()
        .filter_map(|role| role.labels().get(ROLE_LABEL))
        .filter_map(|name| RoleName::parse(name).ok())
        .map(|name| format!("{CONSOLE_PREFIX}{}", name.as_str()))
        .filter(|group| !groups.contains(group))
        .collect();
    groups.extend(custom);
    groups
}

/// The Kubernetes user names the console impersonates for its users `names` (the
/// console's user names): `console:<name>` each, sorted, without duplicates.
pub fn users_for<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> Vec<String> {
    let users: BTreeSet<String> = names
        .into_iter()
        .map(|name| format!("{CONSOLE_PREFIX}{}", name.as_ref()))
        .collect();
    users.into_iter().collect()
}

/// The rules of [`GROUPS_ROLE`] or [`USERS_ROLE`]: `impersonate` on the `resource`
/// (`groups`, `users`) named `names`; none at all for no names (RBAC reads a rule without
/// names as every name).
fn rules(resource: &str, names: &[String]) -> Vec<PolicyRule> {
    if names.is_empty() {
        return Vec::new();
    }
    vec![PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec![resource.into()]),
        verbs: vec!["impersonate".into()],
        resource_names: Some(names.to_vec()),
        ..PolicyRule::default()
    }]
}

/// The groups `role` lets its holder impersonate, or `None` when it lets them impersonate
/// any group (a matching rule without names).
pub fn impersonable_in(role: &ClusterRole) -> Option<BTreeSet<String>> {
    named_in(role, "groups")
}

/// The users `role` lets its holder impersonate, or `None` when it lets them impersonate
/// any user (a matching rule without names).
pub fn impersonable_users_in(role: &ClusterRole) -> Option<BTreeSet<String>> {
    named_in(role, "users")
}

/// The `resource` names `role` lets its holder impersonate; `None`: every one.
fn named_in(role: &ClusterRole, resource: &str) -> Option<BTreeSet<String>> {
    let has = |list: Option<&Vec<String>>, want: &str| {
        list.is_some_and(|l| l.iter().any(|v| v == want || v == "*"))
    };
    let mut named = BTreeSet::new();
    for rule in role.rules.iter().flatten() {
        if !has(Some(&rule.verbs), "impersonate")
            || !has(rule.api_groups.as_ref(), "")
            || !has(rule.resources.as_ref(), resource)
        {
            continue;
        }
        match rule.resource_names.as_ref().filter(|n| !n.is_empty()) {
            Some(names) => named.extend(names.iter().cloned()),
            None => return None,
        }
    }
    Some(named)
}

/// Makes [`GROUPS_ROLE`] name exactly [`groups_for`] the custom roles now in the cluster,
/// replacing its rules when they differ (with `client`, the console's own credentials:
/// `list` on ClusterRoles, `get`, `update` and `escalate` on that one). A replace that
/// meets another writer's change (409: the Roles page and the controllers react to the
/// same role) is tried again from a fresh read, up to [`ATTEMPTS`] times. Returns the
/// groups.
///
/// Errors: the API server's (a 404 when the chart's ClusterRole is missing; a 409 when it
/// kept changing).
pub async fn reconcile(client: &Client) -> Result<Vec<String>, Error> {
    retrying(|| async {
        let custom = Api::<ClusterRole>::all(client.clone())
            .list(&ListParams::default().labels(ROLE_LABEL))
            .await?
            .items;
        let groups = groups_for(&custom);
        set_names(client, GROUPS_ROLE, "groups", &groups).await?;
        Ok(groups)
    })
    .await
}

/// Makes [`USERS_ROLE`] name exactly the Kubernetes users `users` (the console's users
/// through [`users_for`] and the tenant people it acts for, `oidc:<tenant>:<sub>`, as its
/// database lists them now), like [`reconcile`] does for the groups (`get`, `update` and
/// `escalate` on that one ClusterRole; a 409 tried again). Several replicas on one
/// database converge: each writes what the same tables hold. Returns the user names,
/// sorted, without duplicates.
///
/// Errors: the API server's (a 404 when the chart's ClusterRole is missing; a 409 when it
/// kept changing).
pub async fn reconcile_users(
    client: &Client,
    users: impl IntoIterator<Item = String>,
) -> Result<Vec<String>, Error> {
    let users: Vec<String> = users
        .into_iter()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    retrying(|| set_names(client, USERS_ROLE, "users", &users)).await?;
    Ok(users)
}

/// How many times [`reconcile`] and [`reconcile_users`] try a replace that conflicts.
const ATTEMPTS: u32 = 5;

/// `pass`, tried again from the start after a 409, up to [`ATTEMPTS`] times.
async fn retrying<T, F: Future<Output = Result<T, Error>>>(
    mut pass: impl FnMut() -> F,
) -> Result<T, Error> {
    let mut attempt = 1;
    loop {
        match pass().await {
            Err(Error::Kube(error)) if is_status(&error, 409) && attempt < ATTEMPTS => {
                attempt += 1;
            }
            outcome => return outcome,
        }
    }
}

/// Replaces the rules of the ClusterRole `name` with [`rules`] for `resource` `names`,
/// when they differ (read fresh).
async fn set_names(
    client: &Client,
    name: &str,
    resource: &str,
    names: &[String],
) -> Result<(), Error> {
    let roles = Api::<ClusterRole>::all(client.clone());
    let mut current = roles.get(name).await?;
    let wanted = rules(resource, names);
    if current.rules.as_deref().unwrap_or_default() != wanted.as_slice() {
        current.rules = Some(wanted);
        roles
            .replace(name, &PostParams::default(), &current)
            .await?;
        tracing::info!(?names, "the console now impersonates these {resource}");
    }
    Ok(())
}

/// Runs [`reconcile`] at start, whenever a ClusterRole labelled [`ROLE_LABEL`] or
/// [`GROUPS_ROLE`] itself is made, changed or deleted (a burst is one pass), every
/// [`RESYNC`], and [`RETRY`] after a failed pass; until `stop` completes.
pub(crate) async fn keep_reconciled(client: Client, stop: impl Future<Output = ()>) {
    let roles = Api::<ClusterRole>::all(client.clone());
    let changes = |config: watcher::Config| {
        watcher(roles.clone(), config)
            .default_backoff()
            .filter_map(|event| {
                futures::future::ready(match event {
                    Ok(watcher::Event::InitApply(_) | watcher::Event::Init) | Err(_) => None,
                    Ok(_) => Some(()),
                })
            })
    };
    let events = futures::stream::select(
        changes(watcher::Config::default().labels(ROLE_LABEL)),
        changes(watcher::Config::default().fields(&format!("metadata.name={GROUPS_ROLE}"))),
    );
    futures::pin_mut!(events);
    futures::pin_mut!(stop);
    let mut wait = RESYNC;
    loop {
        tokio::select! {
            () = &mut stop => return,
            event = events.next() => if event.is_none() { return },
            () = tokio::time::sleep(wait) => {}
        }
        while let Some(Some(())) = events.next().now_or_never() {}
        wait = match reconcile(&client).await {
            Ok(_) => RESYNC,
            Err(Error::Kube(error)) if is_status(&error, 404) => {
                // Not installed (a cluster without the chart): its watch wakes us.
                tracing::info!(%error, role = GROUPS_ROLE, "no list of groups to keep");
                RESYNC
            }
            Err(error) => {
                tracing::warn!(%error, role = GROUPS_ROLE, "cannot update the groups the console impersonates; retrying");
                RETRY
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn labelled(value: &str) -> ClusterRole {
        ClusterRole {
            metadata: ObjectMeta {
                name: Some(format!("console-role-{value}")),
                labels: Some([(ROLE_LABEL.to_owned(), value.to_owned())].into()),
                ..ObjectMeta::default()
            },
            ..ClusterRole::default()
        }
    }

    #[test]
    fn the_groups_are_the_authenticated_builtin_and_custom_role_groups() {
        assert_eq!(
            groups_for(&[]),
            [
                "system:authenticated",
                "console:viewer",
                "console:developer",
                "console:operator",
                "console:admin"
            ]
        );
        let custom = [
            labelled("zeta"),
            labelled("auditor"),
            labelled("admin"),
            labelled("auditor"),
            // Not role names: no group comes of them.
            labelled("system:masters"),
            labelled("Upper"),
            labelled(""),
        ];
        assert_eq!(
            groups_for(&custom)[5..],
            ["console:auditor".to_owned(), "console:zeta".to_owned()]
        );
    }

    #[test]
    fn the_impersonable_groups_of_a_role() {
        let mut role = ClusterRole {
            rules: Some(rules("groups", &groups_for(&[]))),
            ..ClusterRole::default()
        };
        let groups = impersonable_in(&role).unwrap();
        assert!(groups.contains("console:admin") && groups.contains("system:authenticated"));
        assert_eq!(groups.len(), 5);
        role.rules.as_mut().unwrap().push(PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["users".into()]),
            verbs: vec!["impersonate".into()],
            ..PolicyRule::default()
        });
        assert_eq!(
            impersonable_in(&role).unwrap().len(),
            5,
            "users are not groups"
        );
        assert_eq!(
            impersonable_users_in(&role),
            None,
            "a users rule without names"
        );
        role.rules.as_mut().unwrap()[0].resource_names = Some(Vec::new());
        assert_eq!(impersonable_in(&role), None, "no names: every group");
    }

    #[test]
    fn the_users_are_the_console_users_prefixed_sorted_once_and_never_none() {
        assert_eq!(
            users_for(["zoe", "admin", "zoe", "bob"]),
            ["console:admin", "console:bob", "console:zoe"]
        );
        let role = ClusterRole {
            rules: Some(rules("users", &users_for(["admin"]))),
            ..ClusterRole::default()
        };
        assert_eq!(
            impersonable_users_in(&role),
            Some(["console:admin".to_owned()].into())
        );
        assert_eq!(impersonable_in(&role), Some(BTreeSet::new()));
        // No users: no rule, never one without names (which would be every user).
        assert!(rules("users", &users_for(Vec::<String>::new())).is_empty());
    }
}
