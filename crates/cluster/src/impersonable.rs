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

/// The one rule of [`GROUPS_ROLE`]: `impersonate` on the groups named `groups`.
fn rule(groups: &[String]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["groups".into()]),
        verbs: vec!["impersonate".into()],
        resource_names: Some(groups.to_vec()),
        ..PolicyRule::default()
    }
}

/// The groups `role` lets its holder impersonate, or `None` when it lets them impersonate
/// any group (a matching rule without names).
pub fn impersonable_in(role: &ClusterRole) -> Option<BTreeSet<String>> {
    let has = |list: Option<&Vec<String>>, want: &str| {
        list.is_some_and(|l| l.iter().any(|v| v == want || v == "*"))
    };
    let mut groups = BTreeSet::new();
    for rule in role.rules.iter().flatten() {
        if !has(Some(&rule.verbs), "impersonate")
            || !has(rule.api_groups.as_ref(), "")
            || !has(rule.resources.as_ref(), "groups")
        {
            continue;
        }
        match rule.resource_names.as_ref().filter(|n| !n.is_empty()) {
            Some(names) => groups.extend(names.iter().cloned()),
            None => return None,
        }
    }
    Some(groups)
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
    let mut attempt = 1;
    loop {
        match reconcile_once(client).await {
            Err(Error::Kube(error)) if is_status(&error, 409) && attempt < ATTEMPTS => {
                attempt += 1;
            }
            outcome => return outcome,
        }
    }
}

/// How many times [`reconcile`] tries a replace that conflicts.
const ATTEMPTS: u32 = 5;

async fn reconcile_once(client: &Client) -> Result<Vec<String>, Error> {
    let roles = Api::<ClusterRole>::all(client.clone());
    let custom = roles
        .list(&ListParams::default().labels(ROLE_LABEL))
        .await?
        .items;
    let groups = groups_for(&custom);
    let mut current = roles.get(GROUPS_ROLE).await?;
    let wanted = vec![rule(&groups)];
    if current.rules.as_ref() != Some(&wanted) {
        current.rules = Some(wanted);
        roles
            .replace(GROUPS_ROLE, &PostParams::default(), &current)
            .await?;
        tracing::info!(groups = ?groups, "the console now impersonates these groups");
    }
    Ok(groups)
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
            rules: Some(vec![rule(&groups_for(&[]))]),
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
        role.rules.as_mut().unwrap()[0].resource_names = Some(Vec::new());
        assert_eq!(impersonable_in(&role), None, "no names: every group");
    }
}
